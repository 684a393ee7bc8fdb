package sched

import "github.com/foreman-sched/foreman/fsm"

// specMemo keeps, across the leader loop's plans, the job specs that
// preemption read (Snapshot.JobSpec: the priority and preemptibility of
// every live attempt's job, read on each plan that leaves a job unplaced).
// Apply never changes a job's spec after its submit (fsm/DESIGN.md,
// "Transitions keep the spec's bytes") and job IDs are never reused, so a
// spec read in an earlier plan is the one the store would return now; the
// plans stay a function of the state. Reading them again was 4% of the
// agents' CPU in a throughput run in which nothing could be preempted
// (docs/benchmarks.md, "The map").
//
// It holds two generations: a spec not asked for during a whole plan is
// dropped at the end of the next, so the memo is about as large as the live
// set. Only the loop's goroutine uses it.
type specMemo struct {
	cur, prev map[string]*fsm.JobSpec
}

// wrap starts a plan's generation and returns read memoized. A missing
// spec (nil: the job is gone, or reading failed) is not kept.
func (m *specMemo) wrap(read func(string) *fsm.JobSpec) func(string) *fsm.JobSpec {
	if read == nil {
		return nil
	}
	m.prev, m.cur = m.cur, map[string]*fsm.JobSpec{}
	return func(id string) *fsm.JobSpec {
		if s, ok := m.cur[id]; ok {
			return s
		}
		s, ok := m.prev[id]
		if !ok {
			s = read(id)
		}
		if s != nil {
			m.cur[id] = s
		}
		return s
	}
}
