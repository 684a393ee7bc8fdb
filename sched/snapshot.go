package sched

import (
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Snapshot is everything Plan reads: a consistent copy of the replicated
// state plus the leader's own view of its followers. Plan never modifies it.
type Snapshot struct {
	// Nodes is every known node.
	Nodes []fsm.Node
	// Pending holds the jobs in waiting, queued and retrying.
	Pending []*fsm.Job
	// Live holds every assigned or running attempt; their Resources are
	// what is allocated on their node.
	Live []fsm.Attempt
	// QueueLimits is max_running per queue (absent or 0 = unlimited).
	QueueLimits map[string]int
	// Running counts jobs with a live attempt per queue.
	Running map[string]int

	// LastHeard is when the leader last heard from each node (raft
	// heartbeats, monotonic). A node absent from it has not been heard from
	// during this leader's term.
	LastHeard map[string]time.Time
	// LeaderSince is when this node became leader. A new leader knows
	// nothing about earlier contacts, so it waits out a lease from here.
	LeaderSince time.Time
}

// Reader is the part of fsm.Tx that LoadSnapshot uses.
type Reader interface {
	Nodes() ([]fsm.Node, error)
	ForEachJobInState(state fsm.JobState, fn func(*fsm.Job) bool) error
	LiveAttempts(fn func(*fsm.Attempt) bool) error
	Queues() (map[string]int, error)
}

// LoadSnapshot copies the state Plan needs out of a read transaction. The
// leader-only fields (LastHeard, LeaderSince) are filled by the caller.
func LoadSnapshot(r Reader) (*Snapshot, error) {
	s := &Snapshot{Running: map[string]int{}, LastHeard: map[string]time.Time{}}
	var err error
	if s.Nodes, err = r.Nodes(); err != nil {
		return nil, err
	}
	if s.QueueLimits, err = r.Queues(); err != nil {
		return nil, err
	}
	for _, st := range []fsm.JobState{fsm.JobQueued, fsm.JobWaiting, fsm.JobRetrying} {
		err := r.ForEachJobInState(st, func(j *fsm.Job) bool {
			c := *j // the callback's job may be reused by the reader
			s.Pending = append(s.Pending, &c)
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	err = r.ForEachJobInState(fsm.JobRunning, func(j *fsm.Job) bool {
		s.Running[j.Spec.Queue]++
		return true
	})
	if err != nil {
		return nil, err
	}
	err = r.LiveAttempts(func(a *fsm.Attempt) bool {
		s.Live = append(s.Live, *a)
		return true
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
