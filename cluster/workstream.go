package cluster

import (
	"bufio"
	"bytes"
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
// server (429 with Retry-After: reconnect storms are spread, not served).

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
	CatchUp      time.Duration // how long a stream waits for this server to reach the client's index (default 5 s)
}

func (l WorkStreamLimits) withDefaults() WorkStreamLimits {
	if l.PingInterval == 0 {
		l.PingInterval = ClientBeatInterval
	}
	if l.NewPerSecond == 0 {
		l.NewPerSecond = 100
	}
	if l.CatchUp == 0 {
		l.CatchUp = 5 * time.Second
	}
	return l
}

// WorkFrame is one line of a work stream.
type WorkFrame struct {
	Type string `json:"type"` // "work" or "ping"
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
	rc := http.NewResponseController(w)
	up := bufio.NewReaderSize(io.LimitReader(r.Body, 1<<40), 4096)
	_ = rc.SetReadDeadline(time.Now().Add(n.cfg.Clients.ReadTimeout))
	self, err := readHello(up, node)
	if err != nil {
		workError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if err := n.Ready(); err != nil {
		workError(w, http.StatusServiceUnavailable, "not_ready", "this server cannot serve work now: "+err.Error())
		return
	}
	select {
	case <-n.workStop:
		workError(w, http.StatusServiceUnavailable, "not_ready", "this server is stopping: try another")
		return
	default:
	}
	cur, err := n.nodeRecord(node)
	if err != nil {
		workError(w, http.StatusServiceUnavailable, "not_ready", err.Error())
		return
	}
	if cur != nil && cur.Role != fsm.RoleClient {
		workError(w, http.StatusConflict, "conflict", fmt.Sprintf("node %q is a raft member of this cluster, not a client: pick another --name", node))
		return
	}
	// Only requests that would open a stream (or wait to catch up) spend
	// a token: the checks above are cheap and change nothing.
	if !n.workAdmission.take(lim.NewPerSecond, time.Now()) {
		// Jittered, so the refused do not come back together.
		w.Header().Set("Retry-After", strconv.Itoa(1+rand.IntN(3)))
		workError(w, http.StatusTooManyRequests, "too_many_requests",
			fmt.Sprintf("this server accepts %d new work streams per second: retry after the delay, or another server", lim.NewPerSecond))
		return
	}
	if err := n.waitApplied(r.Context(), index, lim.CatchUp); err != nil {
		workError(w, http.StatusConflict, "index_ahead", err.Error())
		return
	}
	if status, code, err := n.registerClient(r.Context(), self); err != nil {
		workError(w, status, code, err.Error())
		return
	}
	if err := rc.EnableFullDuplex(); err != nil {
		workError(w, http.StatusInternalServerError, "internal", "full-duplex streams unsupported: "+err.Error())
		return
	}

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stream, detach := n.attached.attach(node)
	defer detach()
	go n.readBeats(ctx, cancel, rc, up, node, stream)
	leave := n.workWaker.join(node)
	defer leave()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := n.serveWork(ctx, w, node, stream); err != nil && !errors.Is(err, context.Canceled) {
		n.logger.Debug("work stream ended", "node", node, "err", err, "cause", context.Cause(ctx))
	}
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
func readHello(up *bufio.Reader, node string) (fsm.Node, error) {
	line, err := readLine(up)
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

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > maxUpFrame {
			return nil, fmt.Errorf("frame over %d bytes", maxUpFrame)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// readBeats reads a stream's beats until it ends or falls silent for the
// read timeout, and then ends the stream (cancel).
func (n *Node) readBeats(ctx context.Context, cancel context.CancelCauseFunc, rc *http.ResponseController, up *bufio.Reader, node string, s *clientStream) {
	var every time.Duration // what the last beat announced
	for ctx.Err() == nil {
		// The next beat is due within the interval the last one announced.
		_ = rc.SetReadDeadline(time.Now().Add(n.cfg.Clients.ReadTimeout + beatSlack(every)))
		line, err := readLine(up)
		if err != nil {
			cancel(fmt.Errorf("client %s: %w", node, err))
			return
		}
		if seq, everyMS, ok := beatSeq(line); ok {
			every = time.Duration(everyMS) * time.Millisecond
			n.attached.beat(s, seq, every, time.Now())
			continue
		}
		var f UpFrame
		if err := json.Unmarshal(line, &f); err == nil && f.Type == UpFrameLeave {
			n.clientLeaving(ctx, node)
			cancel(fmt.Errorf("client %s is stopping", node))
			return
		}
		if err == nil && f.Type == UpFrameHello {
			// A client whose self-description changed (its GPUs, issue 24)
			// says it again; registered off this goroutine, as it commits.
			self, err := checkHello(f, node)
			if err != nil {
				cancel(fmt.Errorf("client %s: %w", node, err))
				return
			}
			go func() {
				if _, _, err := n.registerClient(ctx, self); err != nil {
					n.logger.Warn("client re-registration failed", "client", node, "err", err)
				}
			}()
			continue
		}
		if err != nil || f.Type != UpFrameBeat || f.Seq == 0 {
			cancel(fmt.Errorf("client %s: bad up frame %.100q", node, line))
			return
		}
		if err := checkBeatEvery(f.EveryMS); err != nil {
			cancel(fmt.Errorf("client %s: beat %w", node, err))
			return
		}
		every = time.Duration(f.EveryMS) * time.Millisecond
		n.attached.beat(s, f.Seq, every, time.Now())
	}
}

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

// serveWork writes node's frames until the client leaves, this server
// loses the leader or shuts down.
func (n *Node) serveWork(ctx context.Context, w http.ResponseWriter, node string, stream *clientStream) error {
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	var last, ping []byte
	var lastReset uint64
	var lostSince time.Time // when pings first found no leader contact
	// keepAlive fires after PingInterval without a frame: a per-stream
	// timer, so streams whose pings follow confirmations never wake for it.
	// It waits two relay intervals more, as the next confirmation may come
	// that much later than the last one (a keep-alive just before it would
	// be a second write per beat), and an idle client's slower beats
	// stretch it by half their slack (one interval's difference).
	keepAlive := time.NewTimer(n.cfg.WorkStreams.PingInterval)
	defer keepAlive.Stop()
	flush := func() error {
		keepAlive.Reset(n.cfg.WorkStreams.PingInterval + 2*n.cfg.Clients.RelayInterval + n.attached.slack(stream)/2)
		return rc.Flush()
	}
	send := func(f WorkFrame) error {
		if err := enc.Encode(f); err != nil {
			return err
		}
		return flush()
	}
	// The client's key goes on the next frame whenever the secret it
	// derives from is not the one it was last derived from.
	var keyFrom *string
	newKey := func() string {
		cur := n.workWaker.internalSecret()
		if cur == keyFrom {
			return ""
		}
		keyFrom = cur
		return fsm.ClientKey(*cur, node)
	}
	// By hand: thousands of streams each send one per beat interval.
	writePing := func() error {
		if key := newKey(); key != "" {
			return send(WorkFrame{Type: WorkFramePing, Index: n.fsm.AppliedIndex(), LeaderContact: n.workWaker.leaderContact(),
				Acked: n.attached.acked(stream), Key: key})
		}
		ping = appendPing(ping[:0], n.fsm.AppliedIndex(), n.workWaker.leaderContact(), n.attached.acked(stream))
		if _, err := w.Write(ping); err != nil {
			return err
		}
		return flush()
	}
	for {
		wake := n.workWaker.next(node) // before the read: a change after it wakes us
		index := n.fsm.AppliedIndex()  // before the read: the set is at least this new
		work, err := n.cfg.Work.NodeWork(node)
		if err != nil {
			return fmt.Errorf("work of %s: %w", node, err)
		}
		b, err := json.Marshal(work)
		if err != nil {
			return fmt.Errorf("encode the work of %s: %w", node, err)
		}
		var reset *fsm.GPUReset
		if rec, err := n.nodeRecord(node); err == nil && rec != nil {
			reset = rec.GPUReset
		}
		if !bytes.Equal(b, last) || (reset != nil && reset.Index != lastReset) { // an event that changed nothing here sends nothing
			if err := send(WorkFrame{Type: WorkFrameWork, Index: index, LeaderContact: n.workWaker.leaderContact(), Work: b, Key: newKey(), GPUReset: reset}); err != nil {
				return err
			}
			last = b
			if reset != nil {
				lastReset = reset.Index
			}
		}
		for woken := false; !woken; {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-n.closing:
				return ErrShutdown
			case <-n.workStop:
				return errors.New("this server is stopping: the client moves to another")
			case <-wake:
				woken = true
			case <-stream.confirmed:
				if err := writePing(); err != nil {
					return err
				}
			case <-keepAlive.C:
				contact := n.workWaker.leaderContact()
				switch {
				case contact:
					lostSince = time.Time{}
				case lostSince.IsZero():
					lostSince = time.Now()
				case time.Since(lostSince) >= n.cfg.LeaderContactTimeout:
					return errors.New("lost the leader: dropping the stream so the client moves")
				}
				if err := writePing(); err != nil {
					return err
				}
			}
		}
	}
}

// StopWorkStreams ends every work stream this server holds and refuses
// new ones (503), so its clients move to other servers at once: call it
// when the agent starts to stop (http.Server.Shutdown waits for streams,
// which never go idle by themselves).
func (n *Node) StopWorkStreams() { n.workStopOnce.Do(func() { close(n.workStop) }) }

// appendPing appends a ping frame's JSON line (WorkFrame) to b.
func appendPing(b []byte, index uint64, contact bool, acked uint64) []byte {
	b = append(b, `{"type":"ping","index":`...)
	b = strconv.AppendUint(b, index, 10)
	b = append(b, `,"leader_contact":`...)
	b = strconv.AppendBool(b, contact)
	if acked > 0 {
		b = append(b, `,"acked":`...)
		b = strconv.AppendUint(b, acked, 10)
	}
	return append(b, "}\n"...)
}

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
