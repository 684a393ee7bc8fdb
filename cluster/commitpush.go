package cluster

import "context"

// Commit push. A follower learns that an entry committed only from the
// leader's next AppendEntries. hashicorp/raft sends one when a new entry is
// appended, or, when the log goes quiet, after CommitTimeout (randomised to
// 1–2× CommitTimeout: 5–10 ms with our default). So the last entry of a
// burst — typically a placement for an attempt on a follower — reaches the
// follower's FSM 5–10 ms after it committed, which was the largest part of
// submit → start for jobs placed off the leader.
//
// Lowering CommitTimeout would shorten that wait for every idle moment: the
// replicate loop sends an empty AppendEntries per follower every
// CommitTimeout even when nothing happens (1 ms doubled three idle agents'
// CPU). Instead the leader appends a raft barrier (an entry the FSM never
// sees) after commands were applied: the barrier is appended after their
// commit, so its AppendEntries carries their commit index at once. An idle
// cluster sends nothing.
//
// One push is in flight at a time: under load the next push waits for the
// previous one (a commit round), and it shares the group commit with the
// commands appended meanwhile, so it costs a log record, not an fsync.
// Skipping the push when more entries follow in the log is not safe: with
// pipelined replication those entries may have been sent before the
// commit, carrying the older commit index (a placement appended just
// before the push of the submit that caused it would wait CommitTimeout).
//
// The barrier itself becomes the last entry, so a follower's FSM never
// reaches raft's last index; handleIndex (sync.go) accounts for that.

// pushCommits runs on the leader for one term (until ctx ends).
func (n *Node) pushCommits(ctx context.Context) {
	watch, stop := n.fsm.Watch()
	defer stop()
	var pushed uint64 // the applied index the last push made known
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-watch:
			if !ok {
				return
			}
		}
		applied := n.fsm.AppliedIndex()
		if applied <= pushed {
			continue
		}
		pushed = applied
		// A failure means leadership was lost (ctx ends) or raft is
		// shutting down; the next signal tries again otherwise.
		if err := n.raft.Barrier(n.cfg.ForwardTimeout).Error(); err != nil && ctx.Err() == nil {
			n.logger.Debug("commit push failed", "err", err)
		}
	}
}
