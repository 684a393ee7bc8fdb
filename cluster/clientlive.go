package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// massSilenceWindow: a client declared dead less than this many DeadAfter
// ago still counts as silent for the mass-silence guard.
const massSilenceWindow = 20

// clientLivenessLoop runs on the leader: it commits a client dead once it
// has not been heard from for DeadAfter (stretched by beatSlack when its
// last beat announced the idle interval, or when it is unheard this term),
// and alive again when it is heard from after that. Silence is counted
// from the latest of the last beat relayed to this leader and the moment
// this loop first saw the client alive (a new leader, a client just
// registered): a leader never declares a client dead for a silence it did
// not watch. The mass-silence guard holds every death while too many
// clients are silent at once (ClientLimits.MassSilence*).
func (n *Node) clientLivenessLoop(ctx context.Context) {
	lim := n.cfg.Clients
	tick := time.NewTicker(max(lim.DeadAfter/6, 50*time.Millisecond))
	defer tick.Stop()
	cache := &clientCache{}
	watch := map[string]*clientWatch{}
	var pass uint64
	held := false
	shown := &silentShown{grace: lim.DeadAfter + beatSlack(ClientIdleBeatInterval)}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		clients, err := cache.refresh(n.fsm)
		if err != nil {
			continue
		}
		pass++
		now := time.Now()
		// suspects (silent for half of DeadAfter) and the recently dead
		// count towards the guard, so clients that fall silent together
		// are judged together, not one at a time as each crosses DeadAfter.
		live, suspects, recentDead := 0, 0, 0
		silent := map[string]time.Duration{} // client → how long it was silent
		for name, gossip := range clients {
			w := watch[name]
			if w == nil {
				w = &clientWatch{}
				watch[name] = w
			}
			w.pass = pass
			beat, ok := n.clientsHeard.get(name)
			heard := beat.at
			// A client unheard this term may beat at the idle interval.
			deadAfter := lim.DeadAfter + beatSlack(ClientIdleBeatInterval)
			if ok {
				deadAfter = beat.deadAfter(lim.DeadAfter)
			}
			switch gossip {
			case fsm.NodeAlive, fsm.NodeSuspect:
				live++
				w.markedDead, w.deadSeen = time.Time{}, time.Time{}
				if w.watched.IsZero() {
					w.watched = now
				}
				from := w.watched
				if ok && heard.After(from) {
					from = heard
				}
				if now.Sub(from) > deadAfter/2 {
					suspects++
				}
				if now.Sub(from) > deadAfter {
					silent[name] = now.Sub(from)
				}
			case fsm.NodeDead:
				w.watched = time.Time{}
				if !w.markedDead.IsZero() && now.Sub(w.markedDead) < massSilenceWindow*lim.DeadAfter {
					recentDead++
				}
				if w.deadSeen.IsZero() {
					w.deadSeen = now
				}
				// Heard again after this loop saw it dead (its stream never
				// broke, so it did not register again): alive. A beat from
				// before (a client that said leave) proves nothing.
				if ok && heard.After(w.deadSeen) && now.Sub(heard) < deadAfter {
					if n.commit(ctx, fsm.CmdNodeState, fsm.SetNodeState{Name: name, Gossip: fsm.NodeAlive}) {
						n.logger.Info("client heard from again: alive", "client", name)
						w.markedDead, w.deadSeen = time.Time{}, time.Time{}
					}
				}
			default:
				w.watched = time.Time{}
			}
		}
		if len(watch) > len(clients) {
			for name, w := range watch {
				if w.pass != pass { // its record is gone
					delete(watch, name)
				}
			}
		}
		metrics().clientsSilentHeld.Set(0)
		if len(silent) == 0 {
			held = false
			shown.show(ctx, n, nil, now)
			continue
		}
		unheard, total := suspects+recentDead, live+recentDead
		if limit := max(lim.MassSilenceMin, int(lim.MassSilenceFraction*float64(total))); unheard > limit {
			metrics().clientsSilentHeld.Set(float64(len(silent)))
			if !held {
				n.logger.Warn("many clients silent at once: holding their deaths (a server cut off, a starved leader or a network split?)",
					"silent", len(silent), "unheard", unheard, "clients", total, "limit", limit)
				held = true
			}
			shown.show(ctx, n, silent, now)
			continue
		}
		held = false
		shown.show(ctx, n, nil, now)
		for name, quiet := range silent {
			if n.commit(ctx, fsm.CmdNodeState, fsm.SetNodeState{Name: name, Gossip: fsm.NodeDead}) {
				n.logger.Info("client silent: dead", "client", name, "silent_for", quiet.Round(time.Millisecond))
				w := watch[name]
				w.markedDead, w.deadSeen, w.watched = time.Now(), time.Now(), time.Time{}
			}
		}
	}
}

// clientWatch is what the liveness loop keeps of one client. The loop
// visits every client on each tick (with 5,000 clients it was a sixth of
// an idle leader's CPU), so this is one map entry per client, found once,
// and the entries of clients whose record is gone are dropped without a
// lookup per client.
type clientWatch struct {
	watched    time.Time // when this loop started watching it alive (zero: not watching)
	markedDead time.Time // when this loop committed it dead (zero: not, or alive since)
	deadSeen   time.Time // when this loop first saw it dead (zero: not dead)
	pass       uint64    // the last tick whose client list named it
}

// clientCache is the liveness loop's copy of the clients' states: read
// whole once (and after the FSM's event ring lost events), then only the
// records the ring says changed, so a tick costs nothing per client record.
type clientCache struct {
	pos   uint64
	valid bool
	state map[string]fsm.GossipState
}

func (c *clientCache) refresh(f *fsm.FSM) (map[string]fsm.GossipState, error) {
	ring := f.Events()
	if c.valid {
		touched := map[string]bool{}
		next, ok := ring.Visit(c.pos, func(e *fsm.Event) {
			if e.Type == fsm.EventNode && e.Node != "" {
				touched[e.Node] = true
			}
		})
		if ok {
			c.pos = next
			if len(touched) == 0 {
				return c.state, nil
			}
			err := f.View(func(tx *fsm.Tx) error {
				for name := range touched {
					nd, err := tx.Node(name)
					switch {
					case err == nil && nd.Role == fsm.RoleClient:
						c.state[name] = nd.Gossip
					case err == nil || errors.Is(err, fsm.ErrNotFound):
						delete(c.state, name)
					default:
						return err
					}
				}
				return nil
			})
			if err != nil {
				c.valid = false
			}
			return c.state, err
		}
	}
	pos, _ := ring.Tail() // before the read: later changes are visited next time
	state := map[string]fsm.GossipState{}
	err := f.View(func(tx *fsm.Tx) error {
		nodes, err := tx.Nodes()
		for _, nd := range nodes {
			if nd.Role == fsm.RoleClient {
				state[nd.Name] = nd.Gossip
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	c.pos, c.valid, c.state = pos, true, state
	return state, nil
}
