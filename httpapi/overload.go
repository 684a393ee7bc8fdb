package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Back-pressure on submits. A cluster that takes every job it is sent
// fills its raft log faster than it can commit and its queue faster than it
// can run, and clients time out on submits that may or may not have
// committed. So a submit is refused with 429 and Retry-After, before it is
// accepted, while
//
//   - this node holds Config.MaxPendingJobs jobs or more that it accepted
//     and has not answered yet (queued for or inside a raft entry, or being
//     forwarded to the leader; on the leader this includes what followers
//     forwarded), or
//   - the replicated state holds Config.MaxQueuedJobs or more jobs in state
//     queued (runnable, not placed). Any node can tell: the state is local.
//
// Nothing accepted is refused later: the check happens before the submit
// joins a group, and a refused submit changed nothing, so the client may
// simply send it again after Retry-After.

// ErrOverloaded means the cluster is not taking submits right now.
var ErrOverloaded = errors.New("overloaded")

// queuedRecount is how stale the queued-jobs count may be.
const queuedRecount = 500 * time.Millisecond

type overload struct {
	pending atomic.Int64 // jobs accepted by this node, not yet answered

	mu        sync.Mutex
	queued    int
	countedAt time.Time
}

// admit reserves room for n jobs or says why there is none. release must
// be called once the submit has its answer.
func (s *server) admit(n int) (release func(), err error) {
	if p := s.over.pending.Load(); p >= int64(s.cfg.MaxPendingJobs) {
		return nil, fmt.Errorf("%w: this node holds %d submitted jobs not yet committed (limit %d); retry after %s", ErrOverloaded, p, s.cfg.MaxPendingJobs, s.cfg.RetryAfter)
	}
	if q := s.queuedJobs(); q >= s.cfg.MaxQueuedJobs {
		return nil, fmt.Errorf("%w: %d jobs are queued waiting for room (limit %d); retry after %s", ErrOverloaded, q, s.cfg.MaxQueuedJobs, s.cfg.RetryAfter)
	}
	s.over.pending.Add(int64(n))
	var once sync.Once
	return func() { once.Do(func() { s.over.pending.Add(-int64(n)) }) }, nil
}

// queuedJobs counts the queued jobs, at most once per queuedRecount (a
// count reads one index key per job). A caller that finds the count being
// taken uses the last one.
func (s *server) queuedJobs() int {
	o := &s.over
	if !o.mu.TryLock() {
		o.mu.Lock() // only to read
		q := o.queued
		o.mu.Unlock()
		return q
	}
	defer o.mu.Unlock()
	if now := time.Now(); now.Sub(o.countedAt) >= queuedRecount {
		_ = s.state.View(func(tx *fsm.Tx) error {
			o.queued = tx.CountJobsInState(fsm.JobQueued)
			return nil
		})
		o.countedAt = now
	}
	return o.queued
}

// setRetryAfter tells a refused client when to come back.
func (s *server) setRetryAfter(w http.ResponseWriter) {
	secs := max(int(s.cfg.RetryAfter.Round(time.Second)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}
