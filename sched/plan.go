package sched

import (
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// BehindRecheck is how soon Plan asks to run again when it left jobs
// unplaced while some node was behind the leader's log.
const BehindRecheck = 250 * time.Millisecond

// Decision is what one Plan call produced.
type Decision struct {
	// Commands to apply in order. Each is safe to apply late or twice:
	// Apply re-checks the state it depends on.
	Commands []*fsm.Command
	// NextWake is the earliest time something timed becomes due (a retry,
	// a run_at, a deadline, a lease running out, a drain deadline); zero
	// when nothing is. The loop also wakes on every state change.
	NextWake time.Time
	Stats    Stats
	// Placing is the plan's placements with their queues: what the loop
	// passes to the next plans (Snapshot.Placing) until they are applied.
	Placing []Placing
	// Reasons is the plan's new reasons by job (also in its SetReasons).
	Reasons map[string]string
	// Err is set when reading a queued job from the index failed; the
	// commands are then incomplete (though safe), and the loop plans again.
	Err error
}

// Stats counts what a plan decided, for logs, metrics and tests.
type Stats struct {
	Placed     int // placements emitted
	Unplaced   int // runnable jobs examined and left queued (with a reason); from index runs, one per blocked placement group
	Released   int // waiting/retrying jobs released to queued
	Failed     int // jobs failed for missing their deadline
	Lost       int // attempts marked lost
	Stopped    int // attempts told to stop (drain deadline)
	Preempted  int // jobs that preempted attempts (victims are in the StopAttempts)
	NewReasons int // reasons that changed
	Read       int // queued jobs read from the index runs (Snapshot.Queued)
}

// planning is the scratch state of one Plan call.
type planning struct {
	snap    *Snapshot
	now     time.Time
	cfg     Config
	nodes   []nodeState    // built only when something is to be placed
	nodeIdx map[string]int // name → position in nodes
	// recordIdx: name → position in snap.Nodes, when the snapshot has no
	// NodeIndex (node).
	recordIdx map[string]int

	wake     time.Time
	lost     []*fsm.MarkLost
	stop     []fsm.AttemptRef
	failed   []string
	released []string
	placed   []fsm.Placement
	placings []Placing
	placing  map[string]bool // Snapshot.Placing's jobs: not examined
	reasons  map[string]string
	ports    *portBook // GANG_PORT allocation, built at the first gang
	pre      *preemption
	preempt  []preemptStop
	stats    Stats
	err      error
}

// buildNodeStates computes every node's free capacity: its capacity less
// its live attempts and the placements made but not applied yet.
func (pl *planning) buildNodeStates() {
	snap := pl.snap
	pl.nodes, pl.nodeIdx = newNodeStatesIndexed(snap.Nodes, snap.Live, snap.NodeIndex)
	for i := range snap.Placing {
		p := &snap.Placing[i]
		if len(p.Tasks) > 0 {
			for _, t := range p.Tasks {
				if ni, ok := pl.nodeIdx[t.Node]; ok {
					pl.nodes[ni].take(&p.Resources)
					pl.nodes[ni].markGPUs(t.GPUs, true)
					pl.nodes[ni].markShare(t.GPUShare, p.Resources.GPUMemoryMiB)
				}
			}
			continue
		}
		if ni, ok := pl.nodeIdx[p.Node]; ok {
			pl.nodes[ni].take(&p.Resources)
			pl.nodes[ni].markGPUs(p.GPUs, true)
			pl.nodes[ni].markShare(p.GPUShare, p.Resources.GPUMemoryMiB)
		}
	}
}

// node is the record of the node named, nil when there is none, without
// building node states: the snapshot's index when it has one.
func (pl *planning) node(name string) *fsm.Node {
	snap := pl.snap
	if snap.NodeIndex == nil || len(snap.NodeIndex) != len(snap.Nodes) {
		if pl.recordIdx == nil {
			pl.recordIdx = make(map[string]int, len(snap.Nodes))
			for i := range snap.Nodes {
				pl.recordIdx[snap.Nodes[i].Name] = i
			}
		}
		if i, ok := pl.recordIdx[name]; ok {
			return &snap.Nodes[i]
		}
		return nil
	}
	if i, ok := snap.NodeIndex[name]; ok {
		return &snap.Nodes[i]
	}
	return nil
}

func (pl *planning) wakeAt(t time.Time) {
	if pl.wake.IsZero() || t.Before(pl.wake) {
		pl.wake = t
	}
}

// Plan decides what the leader should commit next, given the state and
// the time. It is pure: the same arguments give the same commands. The
// snapshot's Queued runs are read lazily, so with a snapshot from
// LoadSnapshot Plan must run inside that View.
// The commands come in this order: deadline failures, lost attempts, drain
// stops, releases, placements, reasons.
func Plan(snap *Snapshot, now time.Time, cfg Config) *Decision {
	pl := &planning{snap: snap, now: now, cfg: cfg, reasons: map[string]string{}}
	pl.placing = make(map[string]bool, len(snap.Placing))
	for i := range snap.Placing {
		pl.placing[snap.Placing[i].JobID] = true
	}
	pl.planNodeFailures()
	cands := pl.runnable()
	if len(cands) > 0 || len(snap.Queued) > 0 {
		// Only a plan with something to place pays for every node's free
		// capacity: with thousands of nodes that is most of a plan's cost,
		// and most plans (a burst of delayed submits, a report) place
		// nothing.
		pl.buildNodeStates()
		pl.placeAll(cands) // the candidate queue sorts cands
	}
	if pl.stats.Unplaced > 0 && len(snap.Behind) > 0 {
		// A node catching up with the log changes nothing in the state, so
		// no commit would wake the loop for it: look again shortly (a gang
		// may need exactly that node).
		pl.wakeAt(now.Add(BehindRecheck))
	}
	return &Decision{Commands: pl.commands(), NextWake: pl.wake, Stats: pl.stats, Placing: pl.placings, Reasons: pl.reasons, Err: pl.err}
}

// runnable sorts pending jobs into: failed (deadline passed), released
// (due now), waiting (wake later) and the candidates for placement.
func (pl *planning) runnable() []candidate {
	if !pl.snap.NextDue.IsZero() {
		pl.wakeAt(pl.snap.NextDue)
	}
	cands := make([]candidate, 0, len(pl.snap.Pending))
	for _, j := range pl.snap.Pending {
		if pl.placing[j.ID] {
			continue // placed by an earlier plan, not applied yet
		}
		if d := j.Spec.Deadline; d != nil {
			if !pl.now.Before(*d) {
				pl.failed = append(pl.failed, j.ID)
				continue
			}
			pl.wakeAt(*d)
		}
		switch j.State {
		case fsm.JobQueued:
		case fsm.JobWaiting, fsm.JobRetrying:
			// A waiting job without NextRunAt waits on dependencies, which
			// are released elsewhere.
			if j.NextRunAt.IsZero() {
				continue
			}
			if pl.now.Before(j.NextRunAt) {
				pl.wakeAt(j.NextRunAt)
				continue
			}
			pl.released = append(pl.released, j.ID)
		default:
			continue
		}
		cands = append(cands, candidate{job: j, eff: EffectivePriority(j, pl.now, pl.cfg)})
	}
	pl.stats.Failed = len(pl.failed)
	pl.stats.Released = len(pl.released)
	return cands
}

// placeAll places candidates, and the queued jobs of the snapshot's index
// runs, in priority order. A job that does not fit is passed over
// (smaller, lower-priority jobs may still use the room), so capacity is
// never left idle while something fits. The rest of a job's placement
// group is not read once the job failed: it would fail the same way, since
// free capacity only shrinks and queue counts only grow during a plan.
func (pl *planning) placeAll(cands []candidate) {
	p := newPlacer(pl.nodes, pl.snap.Behind, pl.cfg.MinCandidates)
	running := make(map[string]int, len(pl.snap.Running))
	for q, n := range pl.snap.Running {
		running[q] = n
	}
	for _, p := range pl.snap.Placing {
		if pl.snap.QueueLimits[p.Queue] > 0 {
			running[p.Queue]++
		}
	}
	var inMem map[string]bool
	if len(pl.snap.Queued) > 0 {
		inMem = make(map[string]bool, len(pl.snap.Pending)+len(pl.placing))
		for _, j := range pl.snap.Pending {
			inMem[j.ID] = true
		}
		for id := range pl.placing {
			inMem[id] = true
		}
	}
	quota := newQuotaBook(pl.snap)
	fair := newFairBook(pl.snap)
	queue := newCandidateQueue(cands, pl.snap.Queued, inMem, pl.now, pl.cfg, fair, pl.snap.GroupNamespaces)
	// Share jobs of one level (the effective priority with fair share
	// off) are held back and placed largest first once the level changes
	// (first-fit decreasing, gpu_share.go).
	var shares shareBatch
	for c, ok := queue.next(); ok; c, ok = queue.next() {
		if shares.due(c) {
			for _, h := range shares.take() {
				pl.placeOne(p, h, queue, running, quota, fair)
			}
		}
		if shares.hold(c) {
			continue
		}
		pl.placeOne(p, c, queue, running, quota, fair)
	}
	for _, h := range shares.take() {
		pl.placeOne(p, h, queue, running, quota, fair)
	}
	pl.err = queue.err
	pl.stats.Read = queue.read
	pl.stats.Placed = len(pl.placed)
	pl.stats.NewReasons = len(pl.reasons)
}

// placeOne places one candidate, or records why it waits (and tries
// preemption for it).
func (pl *planning) placeOne(p *placer, c candidate, queue *candidateQueue, running map[string]int, quota *quotaBook, fair *fairBook) {
	j := c.job
	q := j.Spec.Queue
	var reason string
	ns := j.Spec.Namespace
	tasks := 1
	if j.Spec.Gang != nil {
		tasks = max(1, j.Spec.Gang.Size)
	}
	if lim := pl.snap.QueueLimits[q]; lim > 0 && running[q] >= lim {
		reason = "queue " + queueName(q) + " at max_running " + itoa(lim)
	} else if req := pl.cfg.request(&j.Spec.Resources); quota != nil && quota.misfit(ns, &req, tasks) != "" {
		reason = quota.misfit(ns, &req, tasks)
	} else {
		if j.Spec.Gang != nil {
			if pl.ports == nil {
				pl.ports = newPortBook(pl.snap.Live, pl.snap.Placing)
			}
			slots, r := p.placeGang(&j.Spec, &req, pl.ports)
			if slots != nil {
				running[q]++
				quota.take(ns, &req, len(slots))
				fair.take(ns, &req, len(slots))
				p := fsm.Placement{JobID: j.ID, Node: slots[0].Node, Resources: req, Tasks: slots}
				pl.placed = append(pl.placed, p)
				pl.placings = append(pl.placings, Placing{Placement: p, Queue: q, Namespace: ns})
				return
			}
			reason = r
			goto unplaced
		}
		ni, gpus, r := p.place(&j.Spec, &req)
		if ni >= 0 {
			running[q]++
			quota.take(ns, &req, 1)
			fair.take(ns, &req, 1)
			p := fsm.Placement{JobID: j.ID, Node: pl.nodes[ni].node.Name, Resources: req, GPUs: gpus.whole, GPUShare: gpus.share}
			pl.placed = append(pl.placed, p)
			pl.placings = append(pl.placings, Placing{Placement: p, Queue: q, Namespace: ns})
			return
		}
		reason = r
	}
unplaced:
	// Preemption frees node room, never queue or quota room.
	if reason != "" && !strings.HasPrefix(reason, "queue ") && !strings.HasPrefix(reason, "namespace ") && pl.cfg.Preemption {
		req := pl.cfg.request(&j.Spec.Resources)
		if r, ok := pl.preemption().try(p, j, &req); r != "" {
			reason = r
			if ok {
				pl.stats.Preempted++
			}
		}
	}
	queue.unplaced(j)
	pl.stats.Unplaced++
	cur, ok := pl.snap.PendingReasons[j.ID]
	if !ok {
		cur = j.Reason
	}
	if reason != cur {
		pl.reasons[j.ID] = reason
	}
}

func queueName(q string) string {
	if q == "" {
		return "default"
	}
	return q
}
