package cluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/wallclock"
)

// Work delivery without raft (issue 23; DESIGN.md "Clients"). A
// client (an agent outside raft) learns its attempts from one long-lived,
// full-duplex stream to any server or replica:
//
//	POST /v1/internal/work/{node}?index=I
//
// The request body is newline-delimited JSON up frames (UpFrame): a hello
// with the client's self-description (the server registers it with the
// leader when its record is missing or differs), then a numbered beat
// every ClientBeatInterval (clientbeats.go: how the leader hears clients); a stream
// silent for ClientLimits.ReadTimeout is dropped. The response is
// newline-delimited JSON frames (WorkFrame). A "work" frame
// holds the node's whole set of live attempts as of at least Index (the
// set, not a delta: a node holds at most its slots' worth, and a set
// cannot be half-applied, so a frame lost to a reconnect costs nothing); it
// comes first and again after every change to the node's attempts, woken
// per node (workWaker). A "ping" frame says whether this server is in
// contact with the leader and the newest beat the leader confirmed: the
// client renews its attempts' leases only while a recent beat is confirmed
// (invariant 2). It is sent as soon as the leader confirms a beat, and as
// a keep-alive after PingInterval without a frame (no confirmation: the
// leader is out of reach).
// The server closes the stream when it has lost the leader for
// LeaderContactTimeout, so its clients move to another server rather than
// starve.
//
// index is the highest Index the client has seen, from any server: the
// first frame waits until this server has applied that far (CatchUp at
// most, then 409), so what a client sees never goes back in time when it
// moves between servers. New streams are limited to NewPerSecond per
// server (429 with Retry-After: reconnect storms are spread, not served);
// a client that holds attempts says so (?busy=1) and is admitted from a
// bucket of its own, BusyPerSecond: its attempts' leases run while it is
// refused, and when a server restarts, idle clients must not stand in
// the way of busy ones past the lease.
// Once its request checks out, a stream's connection is taken over from
// net/http and served by one goroutine and shared writers (workconn.go).

// WorkSource builds the payload of a node's work frames: its live attempts
// with what the executor needs to start them (cli/agent supplies the view
// its own executor reads). It must be JSON-encodable.
type WorkSource interface {
	NodeWork(node string) (any, error)
}

// WorkStreamLimits are the work streams' knobs; zero takes the default.
type WorkStreamLimits struct {
	PingInterval time.Duration // a stream silent this long gets a keep-alive ping (default ClientBeatInterval)
	NewPerSecond int           // new streams a server accepts per second (default 100)
	// BusyPerSecond: new streams of clients holding attempts a server
	// accepts per second, besides NewPerSecond (default 10 × NewPerSecond).
	BusyPerSecond int
	CatchUp       time.Duration // how long a stream waits for this server to reach the client's index (default 5 s)
}

func (l WorkStreamLimits) withDefaults() WorkStreamLimits {
	l.PingInterval = cmp.Or(l.PingInterval, ClientBeatInterval)
	l.NewPerSecond = cmp.Or(l.NewPerSecond, 100)
	l.BusyPerSecond = cmp.Or(l.BusyPerSecond, 10*l.NewPerSecond)
	l.CatchUp = cmp.Or(l.CatchUp, 5*time.Second)
	return l
}

// WorkFrame is one line of a work stream.
type WorkFrame struct {
	Type string `json:"type"` // "work", "ping" or "move"
	// Index: a work frame's attempts are as of at least this applied
	// index; a ping's, this server's applied index.
	Index uint64 `json:"index"`
	// LeaderContact: this server was in contact with the leader when it
	// sent the frame (the client's lease renewal gate).
	LeaderContact bool `json:"leader_contact"`
	// Acked is the newest of the client's beats the leader confirmed
	// hearing (clientbeats.go): the client renews leases only while a
	// recent beat is acked.
	Acked uint64          `json:"acked,omitempty"`
	Work  json.RawMessage `json:"work,omitempty"`
	// Key is fsm.ClientKey for the stream's node under ACL: what servers
	// present when they call the client's port. Sent on the first frame
	// and again when the cluster-internal secret rotates.
	Key string `json:"key,omitempty"`
	// GPUReset is the node record's last operator GPU health reset
	// (fsm.ResetGPUs), on work frames: the client's agent clears those
	// devices' XID faults once per reset index.
	GPUReset *fsm.GPUReset `json:"gpu_reset,omitempty"`
	// Server (a move frame): the base URL of the server the client opens
	// its next stream at, at once; the stream ends after it
	// (clientspread.go).
	Server string `json:"server,omitempty"`
}

// UpFrame is one line of a work stream's request body: a hello first
// (and again whenever the client's self-description changes), then a
// beat every ClientBeatInterval (ClientIdleBeatInterval while the client
// holds no attempt).
type UpFrame struct {
	Type string    `json:"type"`           // "hello", "beat" or "leave"
	Seq  uint64    `json:"seq,omitempty"`  // beat: 1, 2, 3, ... per stream
	Node *fsm.Node `json:"node,omitempty"` // hello: the client's self-description
	// EveryMS (beat): the next beat comes within this many milliseconds
	// (0: ClientBeatInterval; at most ClientIdleBeatInterval).
	EveryMS int64 `json:"every_ms,omitempty"`
}

// Up frame types. A client that stops (SIGTERM) sends "leave": it is
// committed dead at once, as gossip does for a server that shuts down,
// instead of after DeadAfter of silence.
const (
	UpFrameHello = "hello"
	UpFrameBeat  = "beat"
	UpFrameLeave = "leave"
)

// Work frame types.
const (
	WorkFrameWork = "work"
	WorkFramePing = "ping"
	WorkFrameMove = "move"
)

// admission is a token bucket: burst NewPerSecond, refilled at that rate.
type admission struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func (a *admission) take(rate int, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last.IsZero() {
		a.tokens = float64(rate)
	} else {
		a.tokens = min(float64(rate), a.tokens+now.Sub(a.last).Seconds()*float64(rate))
	}
	a.last = now
	if a.tokens < 1 {
		return false
	}
	a.tokens--
	return true
}

func workError(w http.ResponseWriter, status int, code, msg string) {
	// A refused stream's body never ends: without "close", net/http reads
	// it (up to 256 KiB) before it writes the reply, so every refusal, a
	// 429 included, reached the client only at the read deadline.
	w.Header().Set("Connection", "close")
	writeApply(w, status, applyResponse{Error: msg, Code: code})
}

// handleWork serves one client's work stream (POST: full duplex, the
// request body carries the client's hello and then its beats).
func (n *Node) handleWork(w http.ResponseWriter, r *http.Request) {
	lim := n.cfg.WorkStreams
	node := r.PathValue("node")
	if err := certBindsNode(r, node); err != nil {
		workError(w, http.StatusForbidden, "forbidden", err.Error())
		return
	}
	if n.cfg.Work == nil {
		workError(w, http.StatusNotImplemented, "not_implemented", "this agent serves no work streams")
		return
	}
	index, err := queryIndex(r)
	if err != nil {
		workError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	// From here the connection is this stream's (workconn.go): net/http
	// neither reads its body nor writes its answer.
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		workError(w, http.StatusHTTPVersionNotSupported, "bad_request", "work streams need HTTP/1.1: "+err.Error())
		return
	}
	up := newUpBody(r, conn, brw.Reader)
	_ = conn.SetReadDeadline(time.Now().Add(n.cfg.Clients.ReadTimeout))
	self, err := readHello(up, node)
	if err != nil {
		rawError(conn, http.StatusBadRequest, "bad_request", err.Error(), 0)
		return
	}
	if err := n.Ready(); err != nil {
		rawError(conn, http.StatusServiceUnavailable, "not_ready", "this server cannot serve work now: "+err.Error(), 0)
		return
	}
	select {
	case <-n.workStop:
		rawError(conn, http.StatusServiceUnavailable, "not_ready", "this server is stopping: try another", 0)
		return
	default:
	}
	cur, err := n.nodeRecord(node)
	if err != nil {
		rawError(conn, http.StatusServiceUnavailable, "not_ready", err.Error(), 0)
		return
	}
	if cur != nil && cur.Role != fsm.RoleClient {
		rawError(conn, http.StatusConflict, "conflict", fmt.Sprintf("node %q is a raft member of this cluster, not a client: pick another --name", node), 0)
		return
	}
	// Only requests that would open a stream (or wait to catch up) spend
	// a token: the checks above are cheap and change nothing.
	// A busy client (it holds attempts, or has not heard what it holds)
	// takes from its own bucket first.
	busy := r.URL.Query().Get("busy") == "1" && n.workAdmissionBusy.take(lim.BusyPerSecond, time.Now())
	if !busy && !n.workAdmission.take(lim.NewPerSecond, time.Now()) {
		// Jittered, so the refused do not come back together.
		rawError(conn, http.StatusTooManyRequests, "too_many_requests",
			fmt.Sprintf("this server accepts %d new work streams per second: retry after the delay, or another server", lim.NewPerSecond), 1+rand.IntN(3))
		return
	}
	if err := n.waitApplied(r.Context(), index, lim.CatchUp); err != nil {
		rawError(conn, http.StatusConflict, "index_ahead", err.Error(), 0)
		return
	}
	if status, code, err := n.registerClient(r.Context(), self); err != nil {
		rawError(conn, status, code, err.Error(), 0)
		return
	}

	c := &workConn{n: n, node: node, conn: conn, up: up}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := n.workConns.add(c); err != nil {
		c.cancel()
		rawError(conn, http.StatusServiceUnavailable, "not_ready", "this server is stopping: try another", 0)
		return
	}
	// Writers woken from here on wait for the stream's fields and its
	// response head.
	c.mu.Lock()
	c.keepAlive = time.AfterFunc(lim.PingInterval, func() { c.mark(dueKeepAlive) })
	c.stream, c.detach = n.attached.attach(node, func() { c.mark(duePing) })
	c.leave = n.workWaker.join(node, func() { c.mark(dueWork) })
	_ = conn.SetWriteDeadline(time.Now().Add(workWriteTimeout))
	if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nCache-Control: no-store\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
		c.endLocked(err, false)
	}
	c.mu.Unlock()
	c.mark(dueWork) // the first frame: the node's attempts as of now
	// A goroutine of its own, not net/http's: its stack is a few frames.
	go c.readBeats()
}

// queryIndex is the request's ?index= (0 when absent).
func queryIndex(r *http.Request) (uint64, error) {
	v := r.URL.Query().Get("index")
	if v == "" {
		return 0, nil
	}
	i, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("index: %q is not a raft index (a non-negative integer)", v)
	}
	return i, nil
}

// readHello reads and checks the stream's first up frame.
func readHello(up *upBody, node string) (fsm.Node, error) {
	line, err := up.readLine()
	if err != nil {
		return fsm.Node{}, fmt.Errorf("hello: %w", err)
	}
	var f UpFrame
	if err := json.Unmarshal(line, &f); err != nil {
		return fsm.Node{}, fmt.Errorf("hello: not a JSON up frame: %w", err)
	}
	return checkHello(f, node)
}

// checkHello checks a hello frame and returns the client's self-description
// less what is not the client's to say.
func checkHello(f UpFrame, node string) (fsm.Node, error) {
	switch {
	case f.Type != UpFrameHello || f.Node == nil:
		return fsm.Node{}, fmt.Errorf("hello: the first frame must be {\"type\":\"hello\",\"node\":{...}} (got type %q)", f.Type)
	case f.Node.Name != node:
		return fsm.Node{}, fmt.Errorf("hello: node.name %q differs from the stream's node %q", f.Node.Name, node)
	case fsm.ValidNodeName(node) != nil:
		return fsm.Node{}, fmt.Errorf("node: %w", fsm.ValidNodeName(node))
	case f.Node.HTTPAddr == "":
		return fsm.Node{}, errors.New("hello: node.http_addr must be set (servers proxy logs and artifacts there)")
	}
	self := *f.Node
	// What the leader decides, and what a client has not got, is not the
	// client's to say.
	self.Role, self.RaftAddr, self.GossipAddr = fsm.RoleClient, "", ""
	self.Gossip, self.Eligibility, self.DrainDeadline, self.StateChangedAt, self.ModifyIndex = "", "", time.Time{}, time.Time{}, 0
	return self, nil
}

// maxUpFrame bounds one up frame (a hello carries labels and resources).
const maxUpFrame = 64 << 10

// beatSeq reads a beat as clients write it ({"type":"beat","seq":N} or
// {"type":"beat","seq":N,"every_ms":M}, M within checkBeatEvery) without
// the JSON decoder, a third of a stream's idle cost; any other form is
// left to it.
func beatSeq(line []byte) (seq uint64, everyMS int64, ok bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"type":"beat","seq":`))
	if !ok {
		return 0, 0, false
	}
	rest, ok = bytes.CutSuffix(rest, []byte("}"))
	if !ok {
		return 0, 0, false
	}
	digits, every, hasEvery := bytes.Cut(rest, []byte(`,"every_ms":`))
	seq, err := strconv.ParseUint(string(digits), 10, 64)
	if err != nil || seq == 0 {
		return 0, 0, false
	}
	if hasEvery {
		everyMS, err = strconv.ParseInt(string(every), 10, 64)
		if err != nil || checkBeatEvery(everyMS) != nil {
			return 0, 0, false
		}
	}
	return seq, everyMS, true
}

// clientLeaving commits a stopping client dead (best effort: silence does
// it later anyway).
func (n *Node) clientLeaving(ctx context.Context, node string) {
	cmd, err := fsm.NewCommand(fsm.CmdNodeState, wallclock.Now(), fsm.SetNodeState{Name: node, Gossip: fsm.NodeDead})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := n.Apply(ctx, cmd); err != nil {
		n.logger.Warn("cannot record a stopping client dead", "client", node, "err", err)
		return
	}
	n.logger.Info("client stopping: dead", "client", node)
}

// nodeRecord is node's record in this server's state (nil: none).
func (n *Node) nodeRecord(node string) (*fsm.Node, error) {
	var cur *fsm.Node
	err := n.fsm.View(func(tx *fsm.Tx) error {
		nd, err := tx.Node(node)
		if err == nil {
			cur = nd
		} else if !errors.Is(err, fsm.ErrNotFound) {
			return err
		}
		return nil
	})
	return cur, err
}

// registerClient makes the leader record self as an alive client when its
// record is missing, differs or is not alive. (A raft member's name was
// refused before.)
func (n *Node) registerClient(ctx context.Context, self fsm.Node) (status int, code string, err error) {
	self = withoutHeld(self, n.FeatureGate().Enabled())
	cur, err := n.nodeRecord(self.Name)
	if err != nil {
		return http.StatusServiceUnavailable, "not_ready", err
	}
	if cur != nil && cur.Role != fsm.RoleClient {
		return http.StatusConflict, "conflict", fmt.Errorf("node %q is a raft member of this cluster, not a client: pick another --name", self.Name)
	}
	if cur != nil && cur.Gossip == fsm.NodeAlive && describe(*cur) == describe(self) {
		return 0, "", nil
	}
	cmd, err := fsm.NewCommand(fsm.CmdUpsertNode, wallclock.Now(), fsm.UpsertNode{Node: self})
	if err != nil {
		return http.StatusBadRequest, "bad_request", err
	}
	if _, err := n.Apply(ctx, cmd); err != nil {
		if errors.Is(err, fsm.ErrBadCommand) {
			return http.StatusBadRequest, "bad_request", err
		}
		return http.StatusServiceUnavailable, errorCode(err), fmt.Errorf("register client %s: %w", self.Name, err)
	}
	return 0, "", nil
}

// StopWorkStreams ends every work stream this server holds and refuses
// new ones (503), so its clients move to other servers at once: call it
// when the agent starts to stop (http.Server.Shutdown knows nothing of
// the streams' taken-over connections).
func (n *Node) StopWorkStreams() { n.workStopOnce.Do(func() { close(n.workStop) }) }

// waitApplied waits until this node's FSM has applied index, at most d.
func (n *Node) waitApplied(ctx context.Context, index uint64, d time.Duration) error {
	if n.fsm.AppliedIndex() >= index {
		return nil
	}
	ch, stop := n.fsm.Watch()
	defer stop()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for n.fsm.AppliedIndex() < index {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("index %d is ahead of this server's applied index %d (after waiting %s): try another server", index, n.fsm.AppliedIndex(), d)
		case <-ch:
		}
	}
	return nil
}
