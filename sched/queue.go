package sched

import (
	"container/heap"
	"slices"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// QueuedRun is one run of queued jobs in the fsm's queued_by_group index:
// jobs of one placement group (fsm.PlacementGroup: same queue, driver,
// constraints and resources) and one priority, oldest first. Within a run
// effective priority, and so the level, never rises from one job to the
// next (older jobs have aged more) and the namespace is the same, so every
// run is already in Plan's order and Plan merges the runs instead of
// reading and sorting every queued job.
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

// runHead is one source of candidates with the order key of its head: an
// index run, or (run nil) a sorted slice of in-memory candidates. With
// fair share on, the in-memory candidates form one source per namespace,
// so every source holds one namespace (the placement group includes it).
type runHead struct {
	run       QueuedRun
	mem       []candidate
	ns        string  // stored namespace (set only with fair share on)
	nsKnown   bool    // ns is set
	fair      float64 // ns's fair-share key when last looked (never above its current key)
	eff       int
	level     int // the head's level (levels.of(eff))
	submitted time.Time
	id        string
}

// before is Plan's order: level (high first: the effective priority
// with fair share off, the effective priority rounded down to a priority
// in use with fair share on; see levels), then the namespace's fair-share
// key (low first; 0 for all when fair share is off), then FIFO by submit
// time, then ID.
//
// It compares the tuples (level, key, submit, ID) lexicographically, and
// each component is a fixed function of the job for the plan (the levels
// are fixed at its start; a key changes only between placements, and
// the queue re-sorts lazily on that, below), so it is a strict weak
// order (a total one: IDs are unique), which the heap needs. A rule
// such as "aging beats fair share across spec priorities but not
// within one" would not be: it can make a < b < c < a.
func before(levelA int, fairA float64, subA time.Time, idA string, levelB int, fairB float64, subB time.Time, idB string) bool {
	if levelA != levelB {
		return levelA > levelB
	}
	if fairA != fairB {
		return fairA < fairB
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
	return before(a.level, a.fair, a.submitted, a.id, b.level, b.fair, b.submitted, b.id)
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*runHead)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// candidateQueue yields candidates in Plan's order from two kinds of
// source merged in one heap: the in-memory candidates (sorted; jobs
// released in this plan, and every queued job of a snapshot built by
// hand) and the index runs (read one job at a time). Once a job of a
// placement group fails to place, the runs of that group are dropped: the
// rest of the group would fail the same way, so they are never read (and
// get no new reason this plan).
//
// With fair share on (fair non-nil), each source's key includes its
// namespace's fair-share key. Keys only grow during a plan, so a stored
// key is never above the current one: when the top's stored key is
// stale it is refreshed and the heap looked at again (lazy
// re-evaluation); a top whose key is current is the true minimum. The
// first key is then the level (levels), not the effective priority.
type candidateQueue struct {
	runs   runHeap
	now    time.Time
	cfg    Config
	fair   *fairBook
	levels levels // nil with fair share off
	// groupNS caches the namespace of a placement group (Snapshot.GroupNamespaces).
	groupNS map[string]string
	// inMem holds the IDs of snapshot jobs already handled in memory, which
	// the runs must not yield again.
	inMem map[string]bool
	dead  map[string]bool // placement groups known not to fit this plan
	index bool            // there are index runs (dead groups matter)
	err   error           // the first failed read
	read  int             // jobs read from runs
}

// mem need not be sorted: the queue sorts it (it may reorder it).
func newCandidateQueue(mem []candidate, runs []QueuedRun, inMem map[string]bool, now time.Time, cfg Config, fair *fairBook, groupNS map[string]string) *candidateQueue {
	q := &candidateQueue{now: now, cfg: cfg, inMem: inMem, dead: map[string]bool{}, fair: fair, groupNS: groupNS}
	q.index = len(runs) > 0
	if fair == nil {
		if len(mem) > 0 {
			sortCandidates(mem)
			for i := range mem {
				mem[i].level = mem[i].eff
			}
			q.runs = append(q.runs, q.memHead(&runHead{mem: mem}))
		}
		for _, r := range runs {
			rh := &runHead{run: r}
			if q.load(rh) {
				q.runs = append(q.runs, rh)
			}
		}
		heap.Init(&q.runs)
		return q
	}
	// Fair share on: the levels are the spec priorities of the
	// candidates, those in memory and the runs' that have a job left
	// to read (a run whose jobs are all handled in memory, or placing,
	// adds none, as a full snapshot would have no such job).
	inUse := map[int]struct{}{}
	for i, c := range mem {
		if p := c.job.Spec.Priority; i == 0 || p != mem[i-1].job.Spec.Priority {
			inUse[p] = struct{}{}
		}
	}
	for _, r := range runs {
		rh := &runHead{run: r}
		if q.load(rh) {
			q.runs = append(q.runs, rh)
			inUse[r.Priority()] = struct{}{}
		}
	}
	q.levels = newLevels(inUse)
	for _, rh := range q.runs {
		rh.level = q.levels.of(rh.eff)
	}
	// One in-memory source per namespace, each sorted in Plan's order
	// (the fair key is the same for all of a source).
	for i := range mem {
		mem[i].level = q.levels.of(mem[i].eff)
	}
	byNS := map[string]*runHead{}
	var memHeads []*runHead
	for _, c := range mem {
		ns := c.job.Spec.Namespace
		h := byNS[ns]
		if h == nil {
			h = &runHead{ns: ns}
			byNS[ns] = h
			memHeads = append(memHeads, h)
		}
		h.mem = append(h.mem, c)
	}
	for _, h := range memHeads {
		slices.SortFunc(h.mem, func(a, b candidate) int {
			if a.level != b.level {
				return b.level - a.level
			}
			if c := a.job.SubmittedAt.Compare(b.job.SubmittedAt); c != 0 {
				return c
			}
			return strings.Compare(a.job.ID, b.job.ID)
		})
		q.runs = append(q.runs, q.memHead(h))
	}
	heap.Init(&q.runs)
	return q
}

// memHead sets an in-memory source's key from its first candidate.
func (q *candidateQueue) memHead(h *runHead) *runHead {
	c := h.mem[0]
	h.eff, h.level, h.submitted, h.id = c.eff, c.level, c.job.SubmittedAt, c.job.ID
	h.fair = q.fair.key(h.ns)
	return h
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
		if q.fair != nil && !rh.nsKnown {
			if !q.runNamespace(rh) {
				return false
			}
		}
		rh.eff = effectivePriority(rh.run.Priority(), sub, q.now, q.cfg)
		rh.level = q.levels.of(rh.eff)
		rh.submitted, rh.id = sub, id
		rh.fair = q.fair.key(rh.ns)
		return true
	}
}

// runNamespace sets rh.ns from the cache or its head job (every job of a
// run is of one namespace); false when the read failed.
func (q *candidateQueue) runNamespace(rh *runHead) bool {
	g := rh.run.Group()
	if ns, ok := q.groupNS[g]; ok {
		rh.ns, rh.nsKnown = ns, true
		return true
	}
	j, err := rh.run.Job()
	if err != nil {
		if q.err == nil {
			q.err = err
		}
		return false
	}
	rh.ns, rh.nsKnown = j.Spec.Namespace, true
	if q.groupNS != nil {
		q.groupNS[g] = rh.ns
	}
	return true
}

// next returns the next candidate, or false when there is none.
func (q *candidateQueue) next() (candidate, bool) {
	for len(q.runs) > 0 {
		top := q.runs[0]
		if top.run != nil && q.dead[top.run.Group()] {
			heap.Pop(&q.runs)
			continue
		}
		if q.fair != nil {
			if k := q.fair.key(top.ns); k != top.fair {
				top.fair = k
				heap.Fix(&q.runs, 0)
				continue
			}
		}
		if top.run == nil {
			c := top.mem[0]
			top.mem = top.mem[1:]
			if len(top.mem) > 0 {
				q.memHead(top)
				heap.Fix(&q.runs, 0)
			} else {
				heap.Pop(&q.runs)
			}
			return c, true
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
		eff := EffectivePriority(j, q.now, q.cfg)
		return candidate{job: j, eff: eff, level: q.levels.of(eff)}, true
	}
	return candidate{}, false
}

// unplaced records that j did not fit: neither will the rest of its group.
func (q *candidateQueue) unplaced(j *fsm.Job) {
	if !q.index {
		return
	}
	q.dead[fsm.PlacementGroup(&j.Spec)] = true
}
