package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Catch-up after a gap. A node that restarts, or that was cut off from the
// leader, holds a stale FSM: it may list an attempt as assigned to it that
// the leader has since declared lost and placed elsewhere. Acting on that
// state would start a second copy of the job. So a node is "in sync" only
// after it has applied everything the leader had when contact was (re)gained,
// and it stops being in sync the moment contact is lost. The leader declares
// a node's attempts lost only after not hearing from it for a lease, which
// is longer than LeaderContactTimeout, so no such gap goes unnoticed.

// syncPoll is how often the node checks contact and retries a catch-up.
const syncPoll = 25 * time.Millisecond

// InSync reports whether this node's FSM holds everything the leader had
// committed when this node last gained contact with it, and contact has held
// since. The worker starts no attempt while it is false.
// After a stall (stall.go) it is false until the sync loop has run again
// and caught up.
func (n *Node) InSync() bool { return n.inSync.Load() && n.stalls.Fresh(time.Now()) }

func (n *Node) signalSyncFlip() {
	select {
	case n.syncFlipped <- struct{}{}:
	default:
	}
}

func (n *Node) syncLoop() {
	for range ticks(syncPoll, n.closing) {
		// time.Now, not the tick's time: after a stall the tick that was
		// due may be delivered with the time it fell due.
		if gap, stalled := n.stalls.Poll(time.Now()); stalled && n.inSync.Swap(false) {
			n.logger.Info("did not run for a while; out of sync", "gap", gap.Round(time.Millisecond))
			n.signalSyncFlip()
		}
		if !n.InContactWithLeader() {
			if n.inSync.Swap(false) {
				n.logger.Info("lost contact with the leader; out of sync")
				n.signalSyncFlip()
			}
			continue
		}
		if n.inSync.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ForwardTimeout)
		idx, err := n.catchUp(ctx)
		cancel()
		if err != nil {
			n.logger.Debug("catch-up with the leader failed; retrying", "err", err)
			continue
		}
		if n.InContactWithLeader() {
			n.inSync.Store(true)
			n.logger.Info("in sync with the leader", "index", idx)
			n.signalSyncFlip()
		}
	}
}

// catchUp waits until this node has applied the leader's last log index as
// of now. On the leader a barrier does the same.
func (n *Node) catchUp(ctx context.Context) (uint64, error) {
	if n.IsLeader() {
		if err := n.Barrier(ctx); err != nil {
			return 0, err
		}
		return n.fsm.AppliedIndex(), nil
	}
	idx, err := n.leaderIndex(ctx)
	if err != nil {
		return 0, err
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for n.fsm.AppliedIndex() < idx {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("applied %d of %d: %w", n.fsm.AppliedIndex(), idx, ctx.Err())
		case <-n.closing:
			return 0, ErrShutdown
		case <-t.C:
		}
		if !n.InContactWithLeader() {
			return 0, ErrNoLeader
		}
	}
	return idx, nil
}

type indexResponse struct {
	Index uint64 `json:"index"`
	applyResponse
}

// leaderIndex asks the leader for its last log index.
func (n *Node) leaderIndex(ctx context.Context) (uint64, error) {
	addr := n.leaderHTTP()
	if addr == "" {
		return 0, ErrNoLeader
	}
	resp, err := n.internalCall(ctx, http.MethodGet, addr, "index", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var ir indexResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&ir); err != nil {
		return 0, fmt.Errorf("leader index: status %d: %w", resp.StatusCode, err)
	}
	if ir.Code != "" || ir.Error != "" {
		return 0, decodeError(ir.Code, ir.Error)
	}
	return ir.Index, nil
}

// handleIndex answers a follower's catch-up: the index of the last command
// in this leader's log, after confirming it still leads (a deposed leader's
// log may miss what its successor committed). A barrier does both: it
// commits only with a quorum, and once it is applied here every command
// appended before it is in this FSM, so the FSM's applied index covers them
// all. raft's last index would not do: the log may end with barriers
// (commit pushes, commitpush.go), which no FSM ever records as applied.
func (n *Node) handleIndex(w http.ResponseWriter, r *http.Request) {
	if !n.IsLeader() {
		writeApply(w, http.StatusMisdirectedRequest, applyResponse{Error: ErrNotLeader.Error(), Code: "not_leader"})
		return
	}
	if err := n.Barrier(r.Context()); err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, ErrNotLeader) {
			code = http.StatusMisdirectedRequest
		}
		writeApply(w, code, applyResponse{Error: err.Error(), Code: errorCode(err)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(indexResponse{Index: n.fsm.AppliedIndex()})
}
