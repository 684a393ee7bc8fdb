package cluster

import (
	"errors"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Sync in gossip. The leader must not place work on a node that is still
// replaying the log (a restart, a fresh join, a long cut-off): the node
// could not start it until it caught up, and the job would sit assigned
// there while other nodes idle. Every node gossips its FSM applied index
// and whether it is in sync (sync.go) at most once per SyncGossipInterval,
// and only when either changed, and at once when the flag flips; the leader reads them in NodesBehind. They
// stay out of the replicated node record: they change all the time and
// would cost a raft entry each.

func (n *Node) syncGossipLoop() {
	t := time.NewTicker(n.cfg.SyncGossipInterval)
	defer t.Stop()
	var lastApplied uint64
	lastBehind := true
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
		case <-n.syncFlipped:
		}
		applied, behind := n.fsm.AppliedIndex(), !n.InSync()
		if applied == lastApplied && behind == lastBehind {
			continue
		}
		if err := n.refreshMeta(); err != nil {
			if errors.Is(err, ErrShutdown) {
				return
			}
			n.logger.Debug("gossip sync state", "err", err)
			continue
		}
		lastApplied, lastBehind = applied, behind
	}
}

// NodesBehind names the nodes the leader should not place work on, from
// their gossip: those that say they are not in sync with the leader, and
// those whose applied index is more than maxLag entries behind this
// node's commit index. The gossiped index may be a SyncGossipInterval
// (plus propagation) old, so maxLag must allow for what commits in that
// time. This node itself is never behind; nor is a node gossip does not
// report on (an older agent), which the scheduler judges as before.
func (n *Node) NodesBehind(maxLag uint64) map[string]bool {
	if n.raft == nil {
		return nil
	}
	commit := n.raft.CommitIndex()
	var out map[string]bool
	for _, m := range n.members.list() {
		if m.Name == n.cfg.Name || m.Status != fsm.NodeAlive {
			continue
		}
		if m.Behind || (maxLag > 0 && m.Applied > 0 && commit > m.Applied+maxLag) {
			if out == nil {
				out = map[string]bool{}
			}
			out[m.Name] = true
		}
	}
	return out
}
