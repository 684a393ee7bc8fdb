package exec

import (
	"context"
	"time"
)

// A start's claim on a supervisor, taken before anything of the attempt is
// prepared: an idle one from the pool, or the right to start a new
// process. New processes are bounded twice:
//   - at most spawnSlots (NumCPU) of this node's are starting at once
//     (from fork until they acknowledge the attempt): a burst of attempts
//     is served by the first supervisors as they come back, not by one
//     process each started together;
//   - on a saturated host (hostload.go) a start waits for one of this
//     node's busy supervisors to come back before it starts another, as
//     long as they do come back: it starts one once none has for twice
//     the last one's time away (at least RecycleWait: they all run long
//     jobs), and after MaxRecycleWait whatever happens. Twice the time
//     away, not a fixed second: on a host at hundreds of runnable tasks a
//     no-op attempt takes seconds, and a start that gave up after one
//     added a process to the very load that slowed it (forty agents on
//     two cores went from ~90 to ~360 supervisors in four seconds).
//
// Before, a node handed twenty no-op attempts forked sixteen supervisors at
// once (the start queue's bound), and forty agents on one 2-core host ran
// 762 of them within ten seconds: their start-up and their runtimes'
// housekeeping cost more than the jobs (docs/benchmarks.md, "Twelfth stop").
type supervisorClaim struct {
	s     *spare // an idle supervisor taken from the pool, or
	spawn bool   // a spawn slot held: start a new one
}

// RecycleWait: a start on a saturated host that saw none of its node's
// busy supervisors come back for this long (or twice the last one's time
// away, if longer) starts another process; MaxRecycleWait bounds its wait
// whatever happens (every waiting start wakes when one comes back, and one
// of them takes it). keepSpares looks at the host again after RecycleWait.
const (
	RecycleWait    = time.Second
	MaxRecycleWait = 10 * time.Second
)

// DefaultSaturatedRunQueue: a host is saturated above four runnable tasks
// per CPU (WorkerConfig.SaturatedRunQueue).
const DefaultSaturatedRunQueue = 4

// claimSupervisor returns the claim of one start; ok false when ctx ended
// first. The claim counts as busy until the attempt's supervisor is back in
// the pool or gone, or until release.
func (w *Worker) claimSupervisor(ctx context.Context) (c supervisorClaim, ok bool) {
	if w.cfg.MaxIdleSupervisors == 0 {
		w.busy.Add(1) // a one-shot start (startSupervisor uncounts it)
		return supervisorClaim{}, true
	}
	var give <-chan time.Time
	var since time.Time // when this start began to wait
	waited := false
	for {
		joined := w.pool.joined() // before the take: a supervisor back in between wakes us
		if s := w.pool.take(); s != nil {
			w.busy.Add(1)
			return supervisorClaim{s: s}, true
		}
		var slots chan struct{} // nil: no spawn now
		if waited || w.busy.Load() == 0 || !w.saturated() {
			slots = w.spawnSlots
		} else if give == nil {
			w.waitedStarts.Add(1)
			since = time.Now()
			t := time.NewTimer(RecycleWait)
			defer t.Stop()
			give = t.C
		}
		select {
		case slots <- struct{}{}:
			w.busy.Add(1)
			return supervisorClaim{spawn: true}, true
		case <-joined:
		case <-give:
			more := waitMore(w.pool.sinceJoined(), w.pool.lastTurn(), time.Since(since))
			if more <= 0 {
				waited = true
			} else {
				give = time.After(more)
			}
		case <-ctx.Done():
			return supervisorClaim{}, false
		}
	}
}

// waitMore is how much longer a start on a saturated host waits for a busy
// supervisor, 0 when it should start one now: a supervisor came back quiet
// ago (others took it), the last one back had been away for turn, and the
// start has waited for waited. It waits on while they come back, until none
// has for twice the last one's time away (at least RecycleWait: they all
// run long jobs), and never past MaxRecycleWait in all.
func waitMore(quiet, turn, waited time.Duration) time.Duration {
	patience := min(max(2*turn, RecycleWait), MaxRecycleWait)
	if quiet >= patience || waited >= MaxRecycleWait {
		return 0
	}
	return min(patience-quiet, MaxRecycleWait-waited)
}

// release gives back a claim whose start did not happen: the supervisor to
// the pool, the spawn slot to the next start.
func (w *Worker) release(c supervisorClaim) {
	if c.s != nil && !w.pool.put(c.s, true) {
		c.s.conn.Close()
	}
	if c.spawn {
		<-w.spawnSlots
	}
	w.busy.Add(-1)
}
