package httpapi

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/foreman-sched/foreman/wallclock"
)

// systemClock is the default Clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return wallclock.Now() }

// ulids mints monotonic ULIDs: IDs minted in the same millisecond still
// sort in minting order, so "newest first" listings follow submit order.
type ulids struct {
	clock Clock
	mu    sync.Mutex
	src   *ulid.MonotonicEntropy
}

// NewULIDs returns an IDs source stamped by clock (nil: the system clock).
func NewULIDs(clock Clock) IDs {
	if clock == nil {
		clock = systemClock{}
	}
	return &ulids{clock: clock, src: ulid.Monotonic(rand.Reader, 0)}
}

func (u *ulids) NewID() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(u.clock.Now()), u.src).String()
}
