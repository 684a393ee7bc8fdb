package sched

import (
	"container/heap"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// QueuedRun is one run of queued jobs in the fsm's queued_by_group index:
// jobs of one placement group (fsm.PlacementGroup: same queue, driver,
// constraints and resources) and one priority, oldest first. Within a run
// effective priority never rises from one job to the next (older jobs
// have aged more), so every run is already in Plan's order and Plan
// merges the runs instead of reading and sorting every queued job.
// *fsm.QueuedRun satisfies it; it is valid only inside the View it came
// from.
type QueuedRun interface {
	Group() string
	Priority() int
	// Head is the oldest remaining job's submit time and ID (read from the
	// index, not the record); ok is false once the run is exhausted.
	Head() (submitted time.Time, id string, ok bool)
	// Job reads the head job's record.
	Job() (*fsm.Job, error)
	// Advance moves past the head.
	Advance()
}

// runHead is a run with the order key of its head.
type runHead struct {
	run       QueuedRun
	eff       int
	submitted time.Time
	id        string
}

// before is Plan's order: effective priority (high first), then FIFO by
// submit time, then ID.
func before(effA int, subA time.Time, idA string, effB int, subB time.Time, idB string) bool {
	if effA != effB {
		return effA > effB
	}
	if c := subA.Compare(subB); c != 0 {
		return c < 0
	}
	return strings.Compare(idA, idB) < 0
}

type runHeap []*runHead

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	return before(a.eff, a.submitted, a.id, b.eff, b.submitted, b.id)
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*runHead)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// candidateQueue yields candidates in Plan's order from two sources: the
// in-memory candidates (sorted; jobs released in this plan, and every
// queued job of a snapshot built by hand) and the index runs (read one
// job at a time). Once a job of a placement group fails to place, the
// runs of that group are dropped: the rest of the group would fail the
// same way, so they are never read (and get no new reason this plan).
type candidateQueue struct {
	mem  []candidate
	runs runHeap
	now  time.Time
	cfg  Config
	// inMem holds the IDs of snapshot jobs already handled in memory, which
	// the runs must not yield again.
	inMem map[string]bool
	dead  map[string]bool // placement groups known not to fit this plan
	err   error           // the first failed read
	read  int             // jobs read from runs
}

func newCandidateQueue(mem []candidate, runs []QueuedRun, inMem map[string]bool, now time.Time, cfg Config) *candidateQueue {
	q := &candidateQueue{mem: mem, now: now, cfg: cfg, inMem: inMem, dead: map[string]bool{}}
	for _, r := range runs {
		rh := &runHead{run: r}
		if q.load(rh) {
			q.runs = append(q.runs, rh)
		}
	}
	heap.Init(&q.runs)
	return q
}

// load sets rh's order key from its run's head, skipping jobs handled in
// memory; false when the run is exhausted.
func (q *candidateQueue) load(rh *runHead) bool {
	for {
		sub, id, ok := rh.run.Head()
		if !ok {
			return false
		}
		if q.inMem[id] {
			rh.run.Advance()
			continue
		}
		rh.eff = effectivePriority(rh.run.Priority(), sub, q.now, q.cfg)
		rh.submitted, rh.id = sub, id
		return true
	}
}

// next returns the next candidate, or false when there is none.
func (q *candidateQueue) next() (candidate, bool) {
	for len(q.runs) > 0 {
		top := q.runs[0]
		if q.dead[top.run.Group()] {
			heap.Pop(&q.runs)
			continue
		}
		if len(q.mem) > 0 {
			m := q.mem[0]
			if !before(top.eff, top.submitted, top.id, m.eff, m.job.SubmittedAt, m.job.ID) {
				break
			}
		}
		j, err := top.run.Job()
		if err != nil {
			if q.err == nil {
				q.err = err
			}
			heap.Pop(&q.runs)
			continue
		}
		q.read++
		top.run.Advance()
		if q.load(top) {
			heap.Fix(&q.runs, 0)
		} else {
			heap.Pop(&q.runs)
		}
		return candidate{job: j, eff: EffectivePriority(j, q.now, q.cfg)}, true
	}
	if len(q.mem) > 0 {
		c := q.mem[0]
		q.mem = q.mem[1:]
		return c, true
	}
	return candidate{}, false
}

// unplaced records that j did not fit: neither will the rest of its group.
func (q *candidateQueue) unplaced(j *fsm.Job) {
	if len(q.runs) > 0 {
		q.dead[fsm.PlacementGroup(&j.Spec)] = true
	}
}
