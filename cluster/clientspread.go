package cluster

import (
	"cmp"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Clients spread over the servers (issue 38; DESIGN.md "Clients"). A
// client picks a server at random and stays until its stream ends, so
// after a rolling restart the server restarted last holds almost none, and
// an added server none at all. The leader, which hears every client's
// beats through the server that holds its stream, answers each relay
// with the spread: the servers alive in the raft configuration, their
// HTTP addresses and how many clients each holds (clientSpread). Every
// SpreadInterval a server holding more than its share (the clients over
// the servers, by more than Tolerance) hands the surplus, at most
// MovesPerRound at a time, to the servers below their share, each in
// proportion to what it lacks: it sends the client a "move" frame naming
// the server, then ends the stream; the client opens its next stream there
// at once (no backoff). A planned move is a reconnect like any other:
// the client keeps its attempts and its index, its beats go on from the
// new server within a relay interval, far inside the contact window, so
// no lease lapses and the leader never misses the client. A server
// counts itself from its own streams (exact, at once) and the others from
// the leader's answer; it sheds only down to its share, so two rounds
// never move a client back and forth.

// SpreadLimits are the knobs of the clients' spread; zero takes the
// default.
type SpreadLimits struct {
	// Interval is how often a server compares its clients with its share
	// (default 2 s).
	Interval time.Duration
	// MovesPerRound bounds the clients one server hands off per round
	// (default 50: 25 a second, a quarter of a server's NewPerSecond, so
	// two servers shedding to one never fill its admission).
	MovesPerRound int
	// Tolerance is how far above its share a server may hold before it
	// sheds (default 0.1: 10%).
	Tolerance float64
	// Off turns the spreading off (the clients stay where they attach).
	Off bool
}

func (l SpreadLimits) withDefaults() SpreadLimits {
	l.Interval = cmp.Or(l.Interval, 2*time.Second)
	l.MovesPerRound = cmp.Or(l.MovesPerRound, 50)
	l.Tolerance = cmp.Or(l.Tolerance, 0.1)
	return l
}

// SpreadServer is one server in the leader's answer to a relay.
type SpreadServer struct {
	Name     string `json:"name"`
	HTTPAddr string `json:"http_addr"`
	Clients  int    `json:"clients"`
}

// clientBeatsReply is the leader's answer to a relay (a previous build's
// leader answers {}: no spread, so no server moves a client).
type clientBeatsReply struct {
	Spread []SpreadServer `json:"spread,omitempty"`
}

// spreadView is the newest spread a server learnt, and when.
type spreadView struct {
	servers []SpreadServer
	at      time.Time
}

// spreadCache keeps the leader's spread for a relay interval: every
// server's relay asks for it, and counting walks every client.
type spreadCache struct {
	mu      sync.Mutex
	servers []SpreadServer
	at      time.Time
}

// clientSpread is the leader's view: every server of the raft
// configuration that gossip shows alive with an HTTP address, and the
// clients whose newest beat it relayed (not overdue).
func (n *Node) clientSpread() []SpreadServer {
	now := time.Now()
	c := &n.spreadCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && now.Sub(c.at) < n.cfg.Clients.RelayInterval {
		return c.servers
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	inRaft := map[string]bool{}
	for _, s := range f.Configuration().Servers {
		inRaft[string(s.ID)] = true
	}
	counts := n.clientsHeard.byServer(now, n.cfg.Clients.DeadAfter)
	var out []SpreadServer
	for _, m := range n.members.list() {
		if inRaft[m.Name] && m.Status == fsm.NodeAlive && m.HTTPAddr != "" {
			out = append(out, SpreadServer{Name: m.Name, HTTPAddr: m.HTTPAddr, Clients: counts[m.Name]})
		}
	}
	c.servers, c.at = out, now
	return out
}

// takeSpread records a relay's answer (a follower) or the leader's own
// view.
func (n *Node) takeSpread(servers []SpreadServer) {
	if len(servers) > 0 {
		n.spread.Store(&spreadView{servers: servers, at: time.Now()})
	}
}

// decodeSpread reads a relay's answer; a body that is no reply (an
// older leader's) gives none.
func decodeSpread(body []byte) []SpreadServer {
	var r clientBeatsReply
	if json.Unmarshal(body, &r) != nil {
		return nil
	}
	return r.Spread
}

// spreadLoop hands this server's surplus of clients to the others, one
// round every Interval.
func (n *Node) spreadLoop() {
	lim := n.cfg.Spread
	if lim.Off {
		return
	}
	for range ticks(lim.Interval, n.closing) {
		select {
		case <-n.workStop: // the server stopped serving clients
			return
		default:
		}
		v := n.spread.Load()
		if v == nil || time.Since(v.at) > 3*lim.Interval {
			continue // the leader has not answered lately: nothing to go by
		}
		mine := n.workConns.open()
		plan := planMoves(n.cfg.Name, mine, v.servers, lim)
		if len(plan) == 0 {
			continue
		}
		moved := n.workConns.move(plan, n.serverURL)
		metrics().workStreamMoves.Add(float64(moved))
		n.logger.Info("clients handed to less loaded servers", "clients", mine, "moved", moved)
	}
}

// serverURL is the base URL of a server's API at addr (host:port).
func (n *Node) serverURL(addr string) string {
	if n.cfg.TLS != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// spreadMove is how many clients go to one server.
type spreadMove struct {
	to      SpreadServer
	clients int
}

// planMoves says how many of self's mine clients go where: none unless
// self holds more than its share of the clients by more than the
// tolerance; then its surplus over its share (at most MovesPerRound),
// split over the servers below their share in proportion to what each
// lacks (largest remainders first). servers is the leader's view; self's
// own count is mine.
func planMoves(self string, mine int, servers []SpreadServer, lim SpreadLimits) []spreadMove {
	if !slices.ContainsFunc(servers, func(s SpreadServer) bool { return s.Name == self }) || len(servers) < 2 {
		return nil
	}
	total := mine
	for _, s := range servers {
		if s.Name != self {
			total += s.Clients
		}
	}
	share := float64(total) / float64(len(servers))
	if float64(mine) <= share*(1+lim.Tolerance) {
		return nil
	}
	surplus := min(mine-int(math.Ceil(share)), lim.MovesPerRound)
	if surplus <= 0 {
		return nil
	}
	type lack struct {
		s    SpreadServer
		need float64
	}
	var lacks []lack
	sum := 0.0
	for _, s := range servers {
		if s.Name != self && float64(s.Clients) < share {
			lacks = append(lacks, lack{s, share - float64(s.Clients)})
			sum += share - float64(s.Clients)
		}
	}
	if len(lacks) == 0 {
		return nil
	}
	surplus = min(surplus, int(math.Ceil(sum)))
	// Largest remainder: each its whole part, then one more each to the
	// largest fractions until the surplus is placed.
	out := make([]spreadMove, len(lacks))
	frac := make([]float64, len(lacks))
	placed := 0
	for i, l := range lacks {
		q := float64(surplus) * l.need / sum
		out[i] = spreadMove{to: l.s, clients: int(q)}
		frac[i] = q - float64(int(q))
		placed += int(q)
	}
	order := make([]int, len(lacks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case frac[a] > frac[b]:
			return -1
		case frac[a] < frac[b]:
			return 1
		}
		return 0
	})
	for _, i := range order {
		if placed >= surplus {
			break
		}
		out[i].clients++
		placed++
	}
	return slices.DeleteFunc(out, func(m spreadMove) bool { return m.clients == 0 })
}

// open counts the streams this server holds.
func (s *workConns) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// move hands streams to other servers as plan says, idle clients first
// (no attempt's lease rides on their reconnect), and says how many moved.
func (s *workConns) move(plan []spreadMove, url func(addr string) string) int {
	want := 0
	for _, m := range plan {
		want += m.clients
	}
	s.mu.Lock()
	all := make([]*workConn, 0, len(s.m))
	for c := range s.m {
		all = append(all, c)
	}
	s.mu.Unlock()
	var idle, busy []*workConn
	for _, c := range all {
		if len(idle) >= want {
			break
		}
		if c.idle() {
			idle = append(idle, c)
		} else if len(busy) < want {
			busy = append(busy, c)
		}
	}
	pick := append(idle, busy...)
	moved := 0
	for _, m := range plan {
		for range m.clients {
			if len(pick) == 0 {
				return moved
			}
			c := pick[0]
			pick = pick[1:]
			if c.move(url(m.to.HTTPAddr)) {
				moved++
			}
		}
	}
	return moved
}

// idle reports whether the client's newest beat announced the idle
// interval (it holds no attempt).
func (c *workConn) idle() bool {
	c.mu.Lock()
	st := c.stream
	c.mu.Unlock()
	return st != nil && c.n.attached.slack(st) > 0
}

// move tells the client to open its next stream at server (a base URL)
// and ends this one; false when the stream had ended already.
func (c *workConn) move(server string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(workWriteTimeout))
	frame, err := json.Marshal(WorkFrame{Type: WorkFrameMove, Index: c.n.fsm.AppliedIndex(), LeaderContact: c.n.workWaker.leaderContact(), Server: server})
	if err == nil {
		_, err = c.send(nil, frame)
	}
	c.endLocked(errMoved, err == nil)
	return err == nil
}

// errMoved ends a stream handed to another server.
var errMoved = errors.New("handed to a less loaded server")
