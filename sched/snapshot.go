package sched

import (
	"sort"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Snapshot is everything Plan reads: a consistent view of the replicated
// state plus the leader's own view of its followers. Plan never modifies it.
//
// A snapshot built by LoadSnapshot holds only what a wake can act on: the
// jobs that are due (Pending), the time the next one falls due (NextDue),
// and the queued jobs as index runs that Plan reads lazily (Queued), so a
// wake never reads every pending job. Tests may instead put every job in
// Pending, as earlier versions did; Plan treats both alike.
type Snapshot struct {
	// Nodes is every known node: read-only (LoadSnapshot shares it with
	// other readers of the state).
	Nodes []fsm.Node
	// Pending holds jobs in waiting, queued or retrying that Plan examines
	// in full: from LoadSnapshot, those whose NextRunAt or deadline is at
	// or before the plan's time.
	Pending []*fsm.Job
	// NextDue is when the earliest pending job not in Pending falls due
	// (its NextRunAt or deadline); zero when none does.
	NextDue time.Time
	// Queued are the queued jobs by placement group and priority, read
	// lazily and in order by Plan. Jobs also in Pending are skipped.
	Queued []QueuedRun
	// Live holds every assigned or running attempt; their Resources are
	// what is allocated on their node. Read-only: the slice and its
	// records are shared with other readers (fsm's live set).
	Live []fsm.Attempt
	// QueueLimits is max_running per queue (absent or 0 = unlimited).
	QueueLimits map[string]int
	// Running counts jobs with a live attempt per queue (LoadSnapshot
	// counts only the queues in QueueLimits: the others are not checked).
	Running map[string]int
	// NamespaceQuotas holds the namespace records that set a quota, by
	// stored namespace name ("" = default); NamespaceUsage is what each
	// of them holds now (quota.go). Both nil when no namespace has a quota.
	NamespaceQuotas map[string]*fsm.Namespace
	NamespaceUsage  map[string]NamespaceUsage
	// Shares holds the fair share of every namespace that sets one, by
	// stored namespace name; nil or empty: fair share is off and Plan's
	// order is priority then FIFO. When on, a namespace absent from it
	// counts as share 1 (fairshare.go).
	Shares map[string]int64
	// Recent is each namespace's recent average allocation (finished
	// attempts, decayed with Config.FairShareHalfLife), by stored name;
	// read only with fair share on.
	Recent map[string]Alloc
	// GroupNamespaces caches the namespace of each placement group across
	// plans (a group's key is a hash that includes its namespace, so the
	// answer never changes): Plan adds the groups whose head job it read
	// for it. Nil: no cache. It is the one field Plan writes.
	GroupNamespaces map[string]string
	// Placing holds placements of earlier plans whose Place entries are
	// not applied yet (the leader loop fills it; LoadSnapshot does not).
	// Plan counts them as live attempts on their nodes and as running in
	// their queues, and never examines their jobs (still queued in the
	// state): a plan made while they commit neither places them twice nor
	// over-commits the room they take.
	Placing []Placing
	// PendingReasons holds the reasons earlier plans are committing, by
	// job: Plan compares a job's new reason with it rather than with the
	// job's stored one, so it does not write the same reason twice.
	PendingReasons map[string]string

	// JobSpec reads the spec of a live attempt's job (preemption asks it
	// for the priority and preemptible of possible victims, lazily, inside
	// the plan's View); nil or a nil answer: never a victim.
	JobSpec func(jobID string) *fsm.JobSpec

	// LastHeard is when the leader last heard from each node (raft
	// heartbeats, monotonic). A node absent from it has not been heard from
	// during this leader's term.
	LastHeard map[string]time.Time
	// Behind names nodes that are not in sync with the leader's log (the
	// leader loop fills it from gossip): Plan places nothing on them.
	Behind map[string]bool
	// LeaderSince is when this node became leader. A new leader knows
	// nothing about earlier contacts, so it waits out a lease from here.
	LeaderSince time.Time
	// NodeIndex maps each node's name to its position in Nodes, for Nodes
	// sorted by name (nodeIndexCache builds it; the leader loop keeps it
	// across plans while the node records do not change). Nil: Plan
	// builds its own.
	NodeIndex map[string]int
}

// Reader is the part of fsm.Tx that LoadSnapshot uses.
type Reader interface {
	NodesShared() ([]fsm.Node, error) // read-only: shared with other readers
	ForEachJobInState(state fsm.JobState, fn func(*fsm.Job) bool) error
	ForEachDueJob(now time.Time, fn func(*fsm.Job) bool) (time.Time, error)
	QueuedRuns() ([]*fsm.QueuedRun, error)
	LiveAttemptsShared() ([]fsm.Attempt, error) // read-only: shared with other readers
	Queues() (map[string]int, error)
	SilentClients() (map[string]time.Time, error)
}

// LoadSnapshot reads the state a plan at now needs out of a read
// transaction. The queued runs read from the transaction lazily, so Plan
// must run before the View returns. The leader-only fields (LastHeard,
// LeaderSince) are filled by the caller.
//
// Its cost is O(nodes + live attempts + due jobs + runs), never O(pending
// jobs): waiting jobs an hour away are not read at all.
func LoadSnapshot(r Reader, now time.Time) (*Snapshot, error) {
	s := &Snapshot{Running: map[string]int{}, LastHeard: map[string]time.Time{}}
	var err error
	if s.Nodes, err = r.NodesShared(); err != nil {
		return nil, err
	}
	// Clients whose silence the leader holds take no new attempts (their
	// records stay alive, so nothing of theirs is declared lost).
	silent, err := r.SilentClients()
	if err != nil {
		return nil, err
	}
	s.Nodes = fsm.ShowSilent(s.Nodes, silent)
	if s.QueueLimits, err = r.Queues(); err != nil {
		return nil, err
	}
	s.NextDue, err = r.ForEachDueJob(now, func(j *fsm.Job) bool {
		c := *j // the callback's job may be reused by the reader
		s.Pending = append(s.Pending, &c)
		return true
	})
	if err != nil {
		return nil, err
	}
	runs, err := r.QueuedRuns()
	if err != nil {
		return nil, err
	}
	s.Queued = make([]QueuedRun, len(runs))
	for i, run := range runs {
		s.Queued[i] = run
	}
	if len(s.QueueLimits) > 0 {
		err = r.ForEachJobInState(fsm.JobRunning, func(j *fsm.Job) bool {
			// An array runs as its tasks, which count each.
			if j.Array == nil && s.QueueLimits[j.Spec.Queue] > 0 {
				s.Running[j.Spec.Queue]++
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	if sr, ok := r.(interface {
		JobSpec(id string) (*fsm.JobSpec, error)
	}); ok {
		s.JobSpec = func(id string) *fsm.JobSpec {
			spec, err := sr.JobSpec(id)
			if err != nil {
				return nil
			}
			return spec
		}
	}
	if s.Live, err = r.LiveAttemptsShared(); err != nil {
		return nil, err
	}
	if err := loadNamespaceQuotas(r, s); err != nil {
		return nil, err
	}
	return s, nil
}

// hasNode reports whether name is among s.Nodes (sorted by name, as the
// state returns them).
func (s *Snapshot) hasNode(name string) bool {
	i := sort.Search(len(s.Nodes), func(i int) bool { return s.Nodes[i].Name >= name })
	return i < len(s.Nodes) && s.Nodes[i].Name == name
}
