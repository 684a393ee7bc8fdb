package cluster

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/wallclock"
)

// silentShown keeps the replicated set of held-silent clients
// (fsm/silent.go) equal to the liveness loop's: every server shows those
// clients as silent and the scheduler skips them, while their records stay
// alive. It commits only when the set's names change, and not more often
// than silentShowEvery, so a hold costs a few entries, not one per tick.
type silentShown struct {
	names []string // as last committed; nil until read from the state
	read  bool
	at    time.Time // the last commit
	// A new leader watches every client afresh (clientlive.go), so for
	// grace after its loop starts it keeps the set it inherited, less the
	// clients it has heard since: shrinking it at once would show the
	// held clients alive for a while.
	grace     time.Duration
	start     time.Time
	inherited map[string]time.Time // the set as read, name → since
}

// silentShowEvery bounds how often the set is committed.
const silentShowEvery = time.Second

// show makes the replicated set silent (client → how long silent; nil:
// none held).
func (s *silentShown) show(ctx context.Context, n *Node, silent map[string]time.Duration, now time.Time) {
	if !s.read {
		var cur map[string]time.Time
		if err := n.fsm.View(func(tx *fsm.Tx) (err error) { cur, err = tx.SilentClients(); return err }); err != nil {
			return
		}
		s.names, s.read, s.start, s.inherited = slices.Sorted(maps.Keys(cur)), true, now, cur
	}
	if now.Sub(s.start) < s.grace && len(s.inherited) > 0 {
		kept := make(map[string]time.Duration, len(silent)+len(s.inherited))
		maps.Copy(kept, silent)
		for name, since := range s.inherited {
			if _, ok := kept[name]; ok {
				continue
			}
			// Heard since this loop began watching (a beat relayed to
			// this leader, dated by its age): back, not silent.
			if b, ok := n.clientsHeard.get(name); ok && b.at.After(s.start) {
				continue
			}
			kept[name] = wallclock.Now().Sub(since)
		}
		silent = kept
	}
	names := slices.Sorted(maps.Keys(silent))
	if slices.Equal(names, s.names) || now.Sub(s.at) < silentShowEvery {
		return
	}
	// A server of an older build cannot apply the set: the held clients
	// are still held, only not shown, until every server has it.
	if n.FeatureGate().Enabled()&fsm.FeatureSilentClients == 0 {
		return
	}
	var p fsm.SilentClients
	for _, name := range names {
		p.Clients = append(p.Clients, fsm.SilentClient{Name: name, Since: wallclock.Now().Add(-silent[name]).UTC().Truncate(time.Millisecond)})
	}
	s.at = now
	if n.commit(ctx, fsm.CmdSilentClients, p) {
		s.names = names
		n.logger.Info("held-silent clients shown", "silent", len(names))
	}
}
