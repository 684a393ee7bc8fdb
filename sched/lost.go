package sched

import (
	"slices"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Lost detection (DESIGN.md invariant 2). An attempt on a node that gossip
// reports dead or left may still be running: partitioned, not dead. Its
// supervisor kills it once lease renewals have stopped for L, and renewals
// stop at the latest when the node stops hearing from the leader. So the
// leader waits L + margin after the later of (a) its last contact with the
// node and (b) its own election — a new leader does not know (a), so it
// assumes the node was heard from just before it took office.

// lostReady is when attempts on dead node (record n, nil if none) may be
// declared lost.
func lostReady(snap *Snapshot, node string, n *fsm.Node, cfg Config) time.Time {
	from := snap.LeaderSince
	if t, ok := snap.LastHeard[node]; ok && t.After(from) {
		from = t
	}
	return from.Add(cfg.lostAfter(n))
}

// nodeAttempts groups live attempts by node, in a deterministic order.
type nodeAttempts struct {
	node     string
	attempts []*fsm.Attempt
}

func groupLive(live []fsm.Attempt) []nodeAttempts {
	idx := map[string]int{}
	var out []nodeAttempts
	for i := range live {
		a := &live[i]
		k, ok := idx[a.Node]
		if !ok {
			k = len(out)
			idx[a.Node] = k
			out = append(out, nodeAttempts{node: a.Node})
		}
		out[k].attempts = append(out[k].attempts, a)
	}
	slices.SortFunc(out, func(a, b nodeAttempts) int { return strings.Compare(a.node, b.node) })
	for _, g := range out {
		slices.SortFunc(g.attempts, func(a, b *fsm.Attempt) int {
			if c := strings.Compare(a.JobID, b.JobID); c != 0 {
				return c
			}
			return a.Num - b.Num
		})
	}
	return out
}

func ref(a *fsm.Attempt) fsm.AttemptRef {
	return fsm.AttemptRef{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken}
}

// planNodeFailures returns MarkLost per dead node whose lease has run out
// and the attempts to stop on nodes past their drain deadline.
func (pl *planning) planNodeFailures() {
	for _, g := range groupLive(pl.snap.Live) {
		n := pl.node(g.node)
		switch {
		case n == nil || n.Gossip == fsm.NodeDead || n.Gossip == fsm.NodeLeft:
			if pl.snap.LeaderSince.IsZero() {
				continue // not leader (or unknown since when): never declare lost
			}
			ready := lostReady(pl.snap, g.node, n, pl.cfg)
			if pl.now.Before(ready) {
				pl.wakeAt(ready)
				continue
			}
			why := "node removed"
			if n != nil {
				why = "node " + string(n.Gossip)
			}
			refs := make([]fsm.AttemptRef, 0, len(g.attempts))
			for _, a := range g.attempts {
				refs = append(refs, ref(a))
			}
			for _, chunk := range chunks(refs, pl.cfg.BatchSize) {
				pl.lost = append(pl.lost, &fsm.MarkLost{Node: g.node, Attempts: chunk, Reason: why})
			}
			pl.stats.Lost += len(refs)
		case n.Eligibility == fsm.Draining && !n.DrainDeadline.IsZero():
			if pl.now.Before(n.DrainDeadline) {
				pl.wakeAt(n.DrainDeadline)
				continue
			}
			for _, a := range g.attempts {
				if a.CancelRequested == "" { // already told to stop: do not churn raft
					pl.stop = append(pl.stop, ref(a))
				}
			}
		}
	}
	pl.stats.Stopped = len(pl.stop)
}
