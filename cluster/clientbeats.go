package cluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// How the leader hears clients (DESIGN.md "Clients"). A client sends a
// numbered beat up its work stream every ClientBeatInterval. The server that
// holds the stream relays the newest beat of each of its clients to the
// leader every RelayInterval, with its age; the leader keeps, per client,
// the latest time it heard from it (arrival of the relay minus the age:
// never earlier than the server received the beat, whatever the transit
// time, so never earlier than the client sent it). When the leader answers
// the relay, the server at once sends each of those clients a ping with the
// number of the newest beat the leader confirmed ("acked"). The client
// renews its attempts' leases only while a beat it sent less than
// ClientContactWindow ago is acked, so the leader's last-heard time of a
// client is never earlier than the send time of the beat that keeps its
// leases renewed: the leader's rule "lost after L + margin since last
// heard" holds for clients as for raft members, with a margin that covers
// the window (sched's ClientSafetyMargin, sched/DESIGN.md). Beats are never
// raft writes; only a client's death is committed.

// ClientBeatInterval is how often a client that holds attempts beats. It
// sets the cost of a busy fleet (a read and a write per client per
// interval on its server) against how fast a dead client's jobs rerun (the
// contact window and the margin grow with it): a killed client's jobs
// rerun within L + ClientContactWindow + 1 s (12 s by default).
const ClientBeatInterval = 3 * time.Second

// ClientContactWindow is how long a confirmed beat keeps a client renewing
// its leases: one beat interval plus 2 s for the relay, the leader's answer
// and the ping to come back under load.
const ClientContactWindow = ClientBeatInterval + 2*time.Second

// ClientIdleBeatInterval is how often a client that holds no attempt
// beats. Its beats announce the interval (UpFrame.EveryMS), and what
// follows a beat is timed from it: the server's read timeout and keep-
// alive, the leader's DeadAfter (beatSlack). It has no lease to renew, so
// only how soon its death is seen depends on it (20 s instead of 8 s); its
// cost is a third of a busy client's. When work arrives it beats at once
// at ClientBeatInterval, and the server relays that beat without waiting
// for its tick, so the start waits only for that round trip when the
// contact window has closed. The contact window is the same in both modes.
const ClientIdleBeatInterval = 3 * ClientBeatInterval

// beatSlack is what a beat interval longer than ClientBeatInterval adds to
// the timeouts that follow a beat: two intervals' difference, as
// ReadTimeout and DeadAfter allow two beats by default.
func beatSlack(every time.Duration) time.Duration {
	return 2 * max(0, every-ClientBeatInterval)
}

// ClientLimits are the knobs of clients' liveness; zero takes the default.
type ClientLimits struct {
	// RelayInterval is how often a server relays its clients' beats to the
	// leader (default 250 ms).
	RelayInterval time.Duration
	// ReadTimeout is how long a server waits for the next beat on a stream
	// before dropping it (default two beat intervals and a second).
	ReadTimeout time.Duration
	// DeadAfter is how long the leader waits without hearing from a client
	// before it commits the client dead (default two beat intervals and
	// 2 s: a client half that long silent is a suspect for the mass-silence
	// guard, so one late relay must not make it one). Its attempts are
	// declared lost only once their lease has run out too.
	DeadAfter time.Duration
	// MassSilence holds back deaths when more clients than this fall
	// silent at once: more than max(MassSilenceMin, MassSilenceFraction of
	// the live clients) (defaults 3 and 0.3). A server cut off, a starved
	// leader or a network split makes many clients look silent at once;
	// their jobs are safer left running (their leases still fence them)
	// than rerun.
	MassSilenceMin      int
	MassSilenceFraction float64
}

func (l ClientLimits) withDefaults() ClientLimits {
	l.RelayInterval = cmp.Or(l.RelayInterval, 250*time.Millisecond)
	l.ReadTimeout = cmp.Or(l.ReadTimeout, 2*ClientBeatInterval+time.Second)
	l.DeadAfter = cmp.Or(l.DeadAfter, 2*ClientBeatInterval+2*time.Second)
	l.MassSilenceMin = cmp.Or(l.MassSilenceMin, 3)
	l.MassSilenceFraction = cmp.Or(l.MassSilenceFraction, 0.3)
	return l
}

// clientTable is a server's record of the clients attached to it: each
// client's newest stream (a client that reconnects here replaces its old
// stream, whose beats then count no more).
type clientTable struct {
	mu sync.Mutex
	m  map[string]*clientStream
	// quicker gets a signal when a stream's beats speed up (a client that
	// just got work): its beat is relayed at once, not at the next tick.
	quicker chan struct{}
}

// clientStream is one stream's beats; its beat numbers start at 1.
type clientStream struct {
	seq   uint64        // newest beat
	at    time.Time     // when it arrived (monotonic)
	acked uint64        // newest beat the leader confirmed
	every time.Duration // the interval the newest beat announced (0: ClientBeatInterval)
	// confirmed is called (under the table's lock: it must not block) when
	// acked rises: the stream sends the ping at once, so the client's
	// window starts from a fresh confirmation.
	confirmed func()
}

func newClientTable() *clientTable {
	return &clientTable{m: map[string]*clientStream{}, quicker: make(chan struct{}, 1)}
}

// attach registers a new stream of node, which confirmed tells of each
// newly confirmed beat; detach undoes it.
func (t *clientTable) attach(node string, confirmed func()) (s *clientStream, detach func()) {
	s = &clientStream{confirmed: confirmed}
	t.mu.Lock()
	t.m[node] = s
	t.mu.Unlock()
	return s, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.m[node] == s {
			delete(t.m, node)
		}
	}
}

// beat records beat seq of s, which announced the next within every.
func (t *clientTable) beat(s *clientStream, seq uint64, every time.Duration, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq <= s.seq {
		return
	}
	if s.seq > 0 && every < s.every {
		select {
		case t.quicker <- struct{}{}:
		default:
		}
	}
	s.seq, s.at, s.every = seq, now, every
}

// slack is beatSlack of the interval s's newest beat announced.
func (t *clientTable) slack(s *clientStream) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return beatSlack(s.every)
}

func (t *clientTable) acked(s *clientStream) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return s.acked
}

// relayItem is a beat to relay and the stream to ack when the leader
// confirms it.
type relayItem struct {
	beat   ClientBeat
	stream *clientStream
}

// pending is the newest beat of every client the leader has not confirmed.
func (t *clientTable) pending(now time.Time) []relayItem {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []relayItem
	for node, s := range t.m {
		if s.seq > s.acked {
			out = append(out, relayItem{ClientBeat{Node: node, Seq: s.seq, AgeMS: now.Sub(s.at).Milliseconds(), EveryMS: s.every.Milliseconds()}, s})
		}
	}
	return out
}

// unackAll makes every stream's newest beat pending again: a new leader's
// table starts empty, and it learns at once what each client's last beat
// was and announced (its DeadAfter), instead of from the next beat.
func (t *clientTable) unackAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.m {
		s.acked = 0
	}
}

func (t *clientTable) ack(items []relayItem) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, it := range items {
		if it.beat.Seq > it.stream.acked {
			it.stream.acked = it.beat.Seq
			it.stream.confirmed()
		}
	}
}

// ClientBeat is one client's newest beat in a relay to the leader.
type ClientBeat struct {
	Node  string `json:"node"`
	Seq   uint64 `json:"seq"`
	AgeMS int64  `json:"age_ms"` // how long ago the server received it
	// EveryMS is the interval the beat announced (0: ClientBeatInterval).
	EveryMS int64 `json:"every_ms,omitempty"`
}

// clientBeatsRequest is the body of POST /v1/internal/client-beats.
type clientBeatsRequest struct {
	Server string       `json:"server"`
	Beats  []ClientBeat `json:"beats"`
}

// maxRelayedBeats bounds one relay (a server holds a few thousand clients).
const maxRelayedBeats = 100_000

// heardClients is the leader's last-heard time of each client (monotonic,
// this node's clock), the interval its beat announced and the server that
// relayed it, for this term only.
type heardClients struct {
	mu sync.Mutex
	m  map[string]heardBeat
}

type heardBeat struct {
	at    time.Time
	every time.Duration
	via   string // the server holding the client's stream
}

// deadAfter is how long the leader waits after b before it holds the
// client overdue: DeadAfter, stretched by the slack of b's interval.
func (b heardBeat) deadAfter(limit time.Duration) time.Duration {
	return limit + beatSlack(b.every)
}

func newHeardClients() *heardClients { return &heardClients{m: map[string]heardBeat{}} }

func (h *heardClients) reset() {
	h.mu.Lock()
	h.m = map[string]heardBeat{}
	h.mu.Unlock()
}

func (h *heardClients) get(node string) (heardBeat, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.m[node]
	return b, ok
}

func (h *heardClients) take(beats []ClientBeat, via string, arrived time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range beats {
		t := arrived.Add(-time.Duration(max(b.AgeMS, 0)) * time.Millisecond)
		if t.After(h.m[b.Node].at) {
			h.m[b.Node] = heardBeat{t, time.Duration(b.EveryMS) * time.Millisecond, via}
		}
	}
}

// byServer counts, per server, the clients whose newest beat it relayed
// and that are not yet overdue at now (heard within deadAfter and their
// beat's slack): how the fleet's streams are spread over the servers.
func (h *heardClients) byServer(now time.Time, deadAfter time.Duration) map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, b := range h.m {
		if now.Sub(b.at) <= b.deadAfter(deadAfter) {
			out[b.via]++
		}
	}
	return out
}

// takeClientBeats records relayed beats on the leader. It refuses them
// unless this node leads with a quorum in contact: a deposed leader's
// confirmation would keep a client renewing leases that the new leader
// does not know about.
func (n *Node) takeClientBeats(beats []ClientBeat, via string, arrived time.Time) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if !n.InContactWithLeader() {
		return fmt.Errorf("%w: the leader has no quorum contact", ErrNoLeader)
	}
	n.clientsHeard.take(beats, via, arrived)
	return nil
}

// handleClientBeats serves POST /v1/internal/client-beats on the leader.
func (n *Node) handleClientBeats(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var req clientBeatsRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 32<<20)).Decode(&req); err != nil {
		writeApply(w, http.StatusBadRequest, applyResponse{Error: "body: " + err.Error(), Code: "bad_request"})
		return
	}
	if len(req.Beats) > maxRelayedBeats {
		writeApply(w, http.StatusBadRequest, applyResponse{Error: fmt.Sprintf("beats: %d (max %d)", len(req.Beats), maxRelayedBeats), Code: "bad_request"})
		return
	}
	for i, b := range req.Beats {
		if b.Node == "" || b.Seq == 0 {
			writeApply(w, http.StatusBadRequest, applyResponse{Error: fmt.Sprintf("beats[%d]: node and seq must be set", i), Code: "bad_request"})
			return
		}
		if err := checkBeatEvery(b.EveryMS); err != nil {
			writeApply(w, http.StatusBadRequest, applyResponse{Error: fmt.Sprintf("beats[%d]: %v", i, err), Code: "bad_request"})
			return
		}
	}
	switch err := n.takeClientBeats(req.Beats, req.Server, arrived); {
	case err == nil:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(clientBeatsReply{Spread: n.clientSpread()})
	case err == ErrNotLeader:
		writeApply(w, http.StatusMisdirectedRequest, applyResponse{Error: err.Error(), Code: "not_leader"})
	default:
		writeApply(w, http.StatusServiceUnavailable, applyResponse{Error: err.Error(), Code: errorCode(err)})
	}
}

// relayBeatsLoop sends the attached clients' beats to the leader (itself
// when it leads) and records what the leader confirmed.
func (n *Node) relayBeatsLoop() {
	tick := time.NewTicker(n.cfg.Clients.RelayInterval)
	defer tick.Stop()
	type target struct {
		leader raft.ServerID
		term   uint64
	}
	var relayedTo target // the leader and term of the last relay
	for {
		select {
		case <-n.closing:
			return
		case <-tick.C:
		case <-n.attached.quicker:
		}
		_, id := n.raft.LeaderWithID()
		to := target{id, n.raft.CurrentTerm()}
		if to != relayedTo {
			n.attached.unackAll()
		}
		items := n.attached.pending(time.Now())
		if len(items) == 0 {
			continue
		}
		beats := make([]ClientBeat, len(items))
		for i, it := range items {
			beats[i] = it.beat
		}
		if err := n.relayBeats(beats); err != nil {
			n.logger.Debug("cannot relay client beats to the leader", "clients", len(beats), "err", err)
			continue
		}
		relayedTo = to
		n.attached.ack(items)
	}
}

func (n *Node) relayBeats(beats []ClientBeat) error {
	if n.IsLeader() {
		err := n.takeClientBeats(beats, n.cfg.Name, time.Now())
		if err == nil {
			n.takeSpread(n.clientSpread())
		}
		return err
	}
	addr := n.leaderHTTP()
	if addr == "" {
		return ErrNoLeader
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Clients.RelayInterval*4)
	defer cancel()
	resp, err := n.internalCall(ctx, http.MethodPost, addr, "client-beats", clientBeatsRequest{Server: n.cfg.Name, Beats: beats})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("leader %s: %s %s", addr, resp.Status, bytes.TrimSpace(b))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil {
		n.takeSpread(decodeSpread(b))
	}
	return nil
}

// checkBeatEvery refuses a beat interval no client announces: a longer one
// would put off the client's death without bound.
func checkBeatEvery(ms int64) error {
	if ms < 0 || time.Duration(ms)*time.Millisecond > ClientIdleBeatInterval {
		return fmt.Errorf("every_ms: %d is not between 0 and %d", ms, ClientIdleBeatInterval.Milliseconds())
	}
	return nil
}
