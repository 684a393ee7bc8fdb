package cluster

import (
	"context"
	"strings"
	"time"

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
// Entries a follower must act on are pushed at once: an attempt assigned to
// another node, or a stop requested for one. Every other entry (submits,
// reports, finishes) is pushed once the log has been quiet for pushQuiet
// with nothing in flight: under steady load each AppendEntries already
// carries the previous commit, so no push is needed, and a push per batch
// (a log write, an fsync on every node) made the next submit queue behind
// it. The quiet
// push is what lets CommitTimeout be 500 ms: the replicate loop sends an
// empty AppendEntries per follower every 1–2 × CommitTimeout even when
// nothing happens, which at 5 ms was most of an idle server's CPU (at
// raft's own 50 ms, still half an idle leader's), while a follower still
// learns the end of every burst within pushQuiet.
//
// A push is not waited for: it has done its work once appended. Waiting
// (one push in flight) made a placement applied during a slow commit round
// wait for that round — under heavy load longer than CommitTimeout. Pushes
// stay bounded: one per applied batch holding a placement, and one per
// quiet spell. Skipping the push when more entries follow in the log is
// not safe: with pipelined replication those may have been sent before the
// commit, carrying the older commit index.
//
// The barrier itself becomes the last entry, so a follower's FSM never
// reaches raft's last index; handleIndex (sync.go) accounts for that.

// pushEventBuffer is the push loop's event queue; when it overflows the
// loop pushes anyway (it cannot tell what it missed).
const pushEventBuffer = 1024

// pushQuiet is how long the log must be quiet before the leader pushes the
// commit of entries no follower must act on: about CommitTimeout's old
// 5–10 ms, so followers learn no later than they did, and longer than most
// gaps between group commits under load. Measured on the 2-core VM (raft
// entries per 30,000 submits, 64 clients): no quiet push 979, 3 ms 1,695
// (1,220 when skipped with entries in flight), 6 ms 1,004, 10 ms 985.
const pushQuiet = 6 * time.Millisecond

// pushCommits runs on the leader for one term (until ctx ends).
func (n *Node) pushCommits(ctx context.Context) {
	sub := n.fsm.Subscribe(pushEventBuffer)
	defer sub.Close()
	// Every applied batch wakes applied, events or not (a client's death,
	// a node update): the quiet push covers all entries.
	applied, stopWatch := n.fsm.Watch()
	defer stopWatch()
	var pushed uint64 // the applied index the last push made known
	push := func() {
		index := n.fsm.AppliedIndex()
		if index <= pushed {
			return
		}
		pushed = index
		// Its outcome does not matter: a failure means leadership was lost
		// (ctx ends) or raft is shutting down.
		n.raft.Barrier(n.cfg.ForwardTimeout)
	}
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	defer quiet.Stop()
	for {
		urgent := false
		select {
		case <-ctx.Done():
			return
		case <-quiet.C:
			// Entries still in flight (appended, not yet committed) carry
			// or will carry this commit, and their own apply re-arms the
			// timer; under load there always are some, and a push per
			// quiet gap between group commits cost the leader 17% more
			// CPU per submit. Look again later (a barrier in flight
			// applies nothing to the FSM and would not re-arm it).
			if n.raft.LastIndex() > n.raft.AppliedIndex() {
				quiet.Reset(pushQuiet)
				continue
			}
			push()
			continue
		case _, ok := <-applied:
			if !ok {
				return
			}
			quiet.Reset(pushQuiet)
			continue
		case ev, ok := <-sub.C():
			if !ok {
				return
			}
			urgent = n.followerMustAct(ev)
		}
		// Take what else is queued: one push covers it all.
	drain:
		for {
			select {
			case ev, ok := <-sub.C():
				if !ok {
					return
				}
				urgent = urgent || n.followerMustAct(ev)
			default:
				break drain
			}
		}
		if urgent || sub.Lagged() {
			push()
		}
		// Whatever was pushed, more may follow: (re)start the quiet spell.
		quiet.Reset(pushQuiet)
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
