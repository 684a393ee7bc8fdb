package cluster

import (
	"sync/atomic"
	"time"
)

// Stalls. A process that did not run for a while (SIGSTOP, a frozen VM,
// a host swapping) cannot tell from its own state that time passed: its
// in-sync flag is still set, and the first AppendEntries that was queued
// on its socket refreshes raft's last contact before anything checks it.
// Meanwhile the leader may have declared its attempts lost and placed
// them elsewhere, so starting what its stale FSM lists as assigned would
// run a second copy (jepsen's pause nemeses found it: an attempt started
// 12 s after its node was paused, beside its successor). So the sync loop
// notes when it last ran, a gap of more than StallLimit between two of its
// polls ends "in sync" (a catch-up follows, as after lost contact), and
// InSync is false while the loop's last poll is that old: a worker that
// runs before the loop after a resume starts nothing.

// StallLimit is the gap between two polls of the sync loop (every syncPoll)
// that counts as a stall: far above the loop's scheduling delay on a busy
// host, and far below the lease after which the leader declares a silent
// node's attempts lost (above LeaderContactTimeout, 2 s by default). A
// false stall costs one catch-up round trip and delays starts until then.
const StallLimit = 500 * time.Millisecond

// StallWatch holds when a loop last polled, on the monotonic clock: the
// sync loop here, and a client agent's work stream (cli/agent).
type StallWatch struct {
	base time.Time
	last atomic.Int64 // ns since base; 0: never polled
}

// NewStallWatch returns a watch that has not polled yet.
func NewStallWatch() *StallWatch { return &StallWatch{base: time.Now()} }

// Poll records a poll at now and says whether the gap since the previous
// one was a stall.
func (s *StallWatch) Poll(now time.Time) (gap time.Duration, stalled bool) {
	t := int64(now.Sub(s.base)) + 1 // never 0
	prev := s.last.Swap(t)
	if prev == 0 {
		return 0, false
	}
	gap = time.Duration(t - prev)
	return gap, gap > StallLimit
}

// Fresh reports whether the last poll is recent enough at now that the
// process has not stalled since.
func (s *StallWatch) Fresh(now time.Time) bool {
	last := s.last.Load()
	return last != 0 && time.Duration(int64(now.Sub(s.base))+1-last) <= StallLimit
}
