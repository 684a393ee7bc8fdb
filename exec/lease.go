package exec

import (
	"sync"
	"time"
)

// Clock gives the current time. Durations are always computed from values
// it returns with Sub, which uses the monotonic reading time.Now carries, so
// a wall-clock step never extends or shortens a lease.
type Clock interface{ Now() time.Time }

// SystemClock is the real clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// Lease is the supervisor's side of the fence: the job may run only while
// the agent renewed within the last D.
type Lease struct {
	mu    sync.Mutex
	clock Clock
	d     time.Duration
	last  time.Time
}

// NewLease returns a lease of duration d that counts as renewed now.
func NewLease(clock Clock, d time.Duration) *Lease {
	return &Lease{clock: clock, d: d, last: clock.Now()}
}

// Renew records a renewal now and returns how long the previous one was ago.
func (l *Lease) Renew() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	since := now.Sub(l.last)
	l.last = now
	return since
}

// Remaining is how long until the lease expires (<= 0 once expired).
func (l *Lease) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.d - l.clock.Now().Sub(l.last)
}

// Expired reports whether no renewal arrived for the lease duration.
func (l *Lease) Expired() bool { return l.Remaining() <= 0 }
