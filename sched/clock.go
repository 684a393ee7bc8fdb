package sched

import (
	"time"

	"github.com/foreman-sched/foreman/wallclock"
)

// Clock is the scheduler's only source of time. Tests and the jepsen clock
// nemesis inject their own. Now must carry a monotonic reading comparable
// with the times Raft.LastHeardFrom and Raft.LeaderSince return, because
// lost detection subtracts them.
type Clock interface {
	Now() time.Time
	// NewTimer fires once after d (at once when d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the loop uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// SystemClock returns the real clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return wallclock.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
