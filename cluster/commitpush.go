package cluster

import (
	"context"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// Commit push. A follower learns that an entry committed only from the
// leader's next AppendEntries. hashicorp/raft sends one when a new entry is
// appended, or, when the log goes quiet, after CommitTimeout (randomised to
// 1–2× CommitTimeout: 5–10 ms with our default). So a placement for an
// attempt on a follower — usually the last entry of its burst — reached the
// follower's FSM 5–10 ms after it committed: the largest part of submit →
// start for jobs placed off the leader.
//
// Lowering CommitTimeout shortens that wait at every idle moment: the
// replicate loop sends an empty AppendEntries per follower every
// CommitTimeout even when nothing happens (1 ms doubled three idle agents'
// CPU). Instead the leader appends a raft barrier (an entry the FSM never
// sees) once such a placement is applied: the barrier is appended after the
// placement committed, so its AppendEntries carries that commit at once.
//
// Only entries a follower must act on are pushed: an attempt assigned to
// another node, or a stop requested for one. A push costs a log write (an
// fsync on every node), and pushing every entry (submits, reports) made
// the next submit queue behind those fsyncs; followers learn the rest with
// the next entry or CommitTimeout, as before.
//
// A push is not waited for: it has done its work once appended. Waiting
// (one push in flight) made a placement applied during a slow commit round
// wait for that round — under heavy load longer than CommitTimeout. Pushes
// stay bounded by the placements: one per applied batch that holds any.
// Skipping the push when more entries follow in the log is not safe: with
// pipelined replication those may have been sent before the commit,
// carrying the older commit index.
//
// The barrier itself becomes the last entry, so a follower's FSM never
// reaches raft's last index; handleIndex (sync.go) accounts for that.

// pushEventBuffer is the push loop's event queue; when it overflows the
// loop pushes anyway (it cannot tell what it missed).
const pushEventBuffer = 1024

// pushCommits runs on the leader for one term (until ctx ends).
func (n *Node) pushCommits(ctx context.Context) {
	sub := n.fsm.Subscribe(pushEventBuffer)
	defer sub.Close()
	var pushed uint64 // the applied index the last push made known
	for {
		need := false
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.C():
			if !ok {
				return
			}
			need = n.followerMustAct(ev)
		}
		// Take what else is queued: one push covers it all.
	drain:
		for {
			select {
			case ev, ok := <-sub.C():
				if !ok {
					return
				}
				need = need || n.followerMustAct(ev)
			default:
				break drain
			}
		}
		if sub.Lagged() {
			need = true
		}
		applied := n.fsm.AppliedIndex()
		if !need || applied <= pushed {
			continue
		}
		pushed = applied
		// Its outcome does not matter: a failure means leadership was lost
		// (ctx ends) or raft is shutting down.
		n.raft.Barrier(n.cfg.ForwardTimeout)
	}
}

// followerMustAct reports whether ev is work for another node's executor:
// an attempt placed on it, or a stop requested for one of its attempts.
func (n *Node) followerMustAct(ev fsm.Event) bool {
	switch ev.Type {
	case fsm.EventReset:
		return true
	case fsm.EventAttempt:
		return ev.Node != n.cfg.Name &&
			(ev.State == string(fsm.AttemptAssigned) || strings.HasPrefix(ev.Reason, stopRequestedPrefix))
	}
	return false
}

// stopRequestedPrefix starts the Reason of fsm's stop-request events
// (fsm/apply_attempts.go, requestStop).
const stopRequestedPrefix = "stop requested"
