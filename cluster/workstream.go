package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Work delivery without raft (issue 23; DESIGN.md "Work streams"). A node
// outside raft learns its attempts from one long-lived stream from any
// server or replica:
//
//	GET /v1/internal/work/{node}?index=I
//
// answered with newline-delimited JSON frames (WorkFrame). A "work" frame
// holds the node's whole set of live attempts as of at least Index (the
// set, not a delta: a node holds at most its slots' worth, and a set
// cannot be half-applied, so a frame lost to a reconnect costs nothing); it
// comes first and again after every change to the node's attempts, woken
// per node (workWaker). A "ping" frame comes every PingInterval and says
// whether this server is in contact with the leader: the client renews
// its attempts' leases only while such frames keep coming (invariant 2).
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
	PingInterval time.Duration // how often a ping frame is sent (default 1 s)
	NewPerSecond int           // new streams a server accepts per second (default 100)
	CatchUp      time.Duration // how long a stream waits for this server to reach the client's index (default 5 s)
}

func (l WorkStreamLimits) withDefaults() WorkStreamLimits {
	if l.PingInterval == 0 {
		l.PingInterval = time.Second
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
	LeaderContact bool            `json:"leader_contact"`
	Work          json.RawMessage `json:"work,omitempty"`
}

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
	writeApply(w, status, applyResponse{Error: msg, Code: code})
}

// handleWork serves one node's work stream.
func (n *Node) handleWork(w http.ResponseWriter, r *http.Request) {
	lim := n.cfg.WorkStreams
	node := r.PathValue("node")
	if n.cfg.Work == nil {
		workError(w, http.StatusNotImplemented, "not_implemented", "this agent serves no work streams")
		return
	}
	var index uint64
	if v := r.URL.Query().Get("index"); v != "" {
		i, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			workError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("index: %q is not a raft index (a non-negative integer)", v))
			return
		}
		index = i
	}
	var known bool
	if err := n.fsm.View(func(tx *fsm.Tx) error {
		nd, err := tx.Node(node)
		known = err == nil && nd != nil
		return nil
	}); err != nil || !known {
		workError(w, http.StatusNotFound, "not_found", fmt.Sprintf("node %q is not registered in this cluster", node))
		return
	}
	if err := n.Ready(); err != nil {
		workError(w, http.StatusServiceUnavailable, "not_ready", "this server cannot serve work now: "+err.Error())
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

	leave := n.workWaker.join(node)
	defer leave()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := n.serveWork(r.Context(), w, node); err != nil && !errors.Is(err, context.Canceled) {
		n.logger.Debug("work stream ended", "node", node, "err", err)
	}
}

// serveWork writes node's frames until the client leaves, this server
// loses the leader or shuts down.
func (n *Node) serveWork(ctx context.Context, w http.ResponseWriter, node string) error {
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	var last []byte
	var lostSince time.Time // when pings first found no leader contact
	send := func(f WorkFrame) error {
		if err := enc.Encode(f); err != nil {
			return err
		}
		return rc.Flush()
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
		if !bytes.Equal(b, last) { // an event that changed nothing here sends nothing
			if err := send(WorkFrame{Type: WorkFrameWork, Index: index, LeaderContact: n.InContactWithLeader(), Work: b}); err != nil {
				return err
			}
			last = b
		}
		for woken := false; !woken; {
			ping := n.workWaker.nextPing()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-n.closing:
				return ErrShutdown
			case <-wake:
				woken = true
			case <-ping:
				contact := n.InContactWithLeader()
				switch {
				case contact:
					lostSince = time.Time{}
				case lostSince.IsZero():
					lostSince = time.Now()
				case time.Since(lostSince) >= n.cfg.LeaderContactTimeout:
					return errors.New("lost the leader: dropping the stream so the client moves")
				}
				if err := send(WorkFrame{Type: WorkFramePing, Index: n.fsm.AppliedIndex(), LeaderContact: contact}); err != nil {
					return err
				}
			}
		}
	}
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
