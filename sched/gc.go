package sched

import (
	"context"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// OutputStore deletes objects from the cluster's object store (issue 25;
// the agent adapts objstore.Store). Delete is called from a goroutine of
// the leader's loop and may block for the requests; keys that name no
// object are not an error.
type OutputStore interface {
	Location() string
	Delete(ctx context.Context, keys []string) error
}

// outputsDeleteTimeout bounds one GC's deletions from the store.
const outputsDeleteTimeout = 5 * time.Minute

// gc drops terminal jobs past retention and expired idempotency keys, and
// then deletes the dropped jobs' stored outputs from the object store.
// The keys are read before the GC commits (after it, the records are
// gone); they are deleted only once it has: a GC refused or lost keeps
// its objects. A leader that dies between the two leaves them, which a
// bucket lifecycle rule catches (docs/objectstore.md).
func (s *Scheduler) gc(ctx context.Context, now time.Time) {
	before := now.Add(-s.cfg.Retention)
	var stored map[string][]string
	if s.outputs != nil {
		if err := s.state.View(func(tx *fsm.Tx) error {
			var err error
			stored, err = tx.StoredOutputsBefore(before)
			return err
		}); err != nil {
			s.log.Warn("gc: stored outputs not read", "err", err)
			stored = nil
		}
	}
	cmd := mustCommand(fsm.CmdGC, now, &fsm.GC{
		Before:     before,
		KeysBefore: now.Add(-s.cfg.IdempotencyWindow),
	})
	if res, err := s.raft.Apply(ctx, cmd); err != nil {
		s.log.Warn("gc failed", "err", err)
		return
	} else if res != nil && res.Err != nil {
		s.log.Warn("gc refused", "err", res.Err)
		return
	}
	for loc, keys := range stored {
		if loc != s.outputs.Location() {
			s.log.Warn("gc: outputs in another store left there", "store", loc, "objects", len(keys), "ours", s.outputs.Location())
			continue
		}
		s.deleteOutputs(ctx, keys)
	}
}

// deleteOutputs deletes keys from the store, in the background: a slow
// store must not hold up planning.
func (s *Scheduler) deleteOutputs(ctx context.Context, keys []string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outputsDeleteTimeout)
		defer cancel()
		if err := s.outputs.Delete(ctx, keys); err != nil {
			s.log.Warn("gc: stored outputs not deleted", "objects", len(keys), "err", err)
			return
		}
		s.log.Info("gc: stored outputs deleted", "objects", len(keys))
	}()
}
