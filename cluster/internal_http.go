package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/certs"
	"github.com/foreman-sched/foreman/fsm"
)

// InternalPrefix is where main mounts InternalHandler.
const InternalPrefix = "/v1/internal/"

// ForwardedHeader marks a request one node sent to another; the receiver
// never forwards it again.
const ForwardedHeader = "X-Foreman-Forwarded"

// InternalHandler serves the node-to-node endpoints under /v1/internal/:
// POST apply (a follower's forwarded write; applied only if this node leads),
// POST leave (a follower asking the leader to remove it from raft), GET
// index (a follower catching up; sync.go), POST work/{node} (a client
// outside raft learning its attempts and beating; workstream.go), POST
// client-beats (a server relaying its clients' beats to the leader;
// clientbeats.go), POST reports/{node} (a client's attempt reports;
// clientreports.go) and GET voters (a fresh agent choosing its role;
// voters.go).
//
// With Config.TLS, only callers that presented an agent certificate of the
// cluster CA get through (RequireAgentCert); anyone else gets 403.
func (n *Node) InternalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+InternalPrefix+"apply", n.handleApply)
	mux.HandleFunc("POST "+InternalPrefix+"leave", n.handleLeave)
	mux.HandleFunc("GET "+InternalPrefix+"index", n.handleIndex)
	mux.HandleFunc("POST "+InternalPrefix+"keyring", n.handleKeyring)
	mux.HandleFunc("POST "+InternalPrefix+"work/{node}", n.handleWork)
	mux.HandleFunc("POST "+InternalPrefix+"client-beats", n.handleClientBeats)
	mux.HandleFunc("POST "+InternalPrefix+"reports/{node}", n.handleClientReports)
	mux.HandleFunc("GET "+InternalPrefix+"voters", n.handleVoters)
	if n.cfg.TLS == nil {
		return mux
	}
	return RequireAgentCert(mux)
}

// RequireAgentCert lets through only requests whose TLS client certificate
// verified against the cluster CA and is an agent's (certs.PeerIsServer):
// the guard of every agent-only path on the shared HTTP port.
func RequireAgentCert(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !certs.PeerIsServer(r.TLS) {
			writeApply(w, http.StatusForbidden, applyResponse{
				Error: "this path is for foreman agents only: present an agent certificate of the cluster CA",
				Code:  "forbidden",
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// internalURL is the URL of another node's internal endpoint.
func (n *Node) internalURL(addr, endpoint string) string {
	scheme := "http://"
	if n.cfg.TLS != nil {
		scheme = "https://"
	}
	return scheme + addr + InternalPrefix + endpoint
}

// internalCall sends a node-to-node request to the agent at addr:
// endpoint under InternalPrefix, body as JSON (nil: none), marked
// forwarded so the receiver never passes it on. The caller reads and
// closes the response.
func (n *Node) internalCall(ctx context.Context, method, addr, endpoint string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.internalURL(addr, endpoint), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(ForwardedHeader, "1")
	return n.client.Do(req)
}

func (n *Node) handleApply(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		writeApply(w, http.StatusBadRequest, applyResponse{Error: err.Error(), Code: "bad_request"})
		return
	}
	if !n.IsLeader() {
		writeApply(w, http.StatusMisdirectedRequest, applyResponse{Error: ErrNotLeader.Error(), Code: "not_leader"})
		return
	}
	cmd, err := fsm.DecodeCommand(body)
	if err != nil {
		writeApply(w, http.StatusBadRequest, applyResponse{Error: err.Error(), Code: errorCode(err)})
		return
	}
	if err := n.checkFeatures(cmd); err != nil {
		writeApply(w, http.StatusConflict, applyResponse{Error: err.Error(), Code: errorCode(err)})
		return
	}
	res, err := n.applyBytes(r.Context(), body)
	switch {
	case err == nil:
		writeApply(w, http.StatusOK, applyResponse{Result: res})
	case errors.Is(err, errRetry):
		writeApply(w, http.StatusMisdirectedRequest, applyResponse{Error: ErrNotLeader.Error(), Code: "not_leader"})
	case res != nil:
		// The command was committed and refused by the FSM.
		writeApply(w, http.StatusOK, applyResponse{Result: res, Error: err.Error(), Code: errorCode(err)})
	default:
		writeApply(w, http.StatusServiceUnavailable, applyResponse{Error: err.Error(), Code: errorCode(err)})
	}
}

func writeApply(w http.ResponseWriter, status int, ar applyResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ar)
}

type leaveRequest struct {
	Name string `json:"name"`
}

func (n *Node) handleLeave(w http.ResponseWriter, r *http.Request) {
	var lr leaveRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&lr); err != nil || lr.Name == "" {
		writeApply(w, http.StatusBadRequest, applyResponse{Error: "name: must be set", Code: "bad_request"})
		return
	}
	if !n.IsLeader() {
		writeApply(w, http.StatusMisdirectedRequest, applyResponse{Error: ErrNotLeader.Error(), Code: "not_leader"})
		return
	}
	if err := n.removeServer(lr.Name); err != nil {
		writeApply(w, http.StatusServiceUnavailable, applyResponse{Error: err.Error(), Code: errorCode(err)})
		return
	}
	writeApply(w, http.StatusOK, applyResponse{Result: &fsm.Result{}})
}

// removeServer drops name from the raft configuration (leader only) and
// keeps reconcile from adding it back while its gossip says alive.
func (n *Node) removeServer(name string) error {
	n.markLeaving(name)
	err := n.raft.RemoveServer(raft.ServerID(name), 0, n.cfg.ForwardTimeout).Error()
	if errors.Is(err, raft.ErrNotLeader) {
		return ErrNotLeader
	}
	return err
}

// removeSelf asks the leader to drop this node from raft. A leader hands
// leadership over first so the cluster keeps a leader throughout.
func (n *Node) removeSelf(ctx context.Context) error {
	if !n.hasOtherVoters() && n.IsLeader() {
		return nil // the last voter: nothing to leave
	}
	if n.IsLeader() {
		if err := waitFuture(ctx, n.raft.LeadershipTransfer()); err != nil {
			n.logger.Warn("leadership transfer before leave failed", "err", err)
		}
	}
	deadline := time.Now().Add(n.cfg.ForwardTimeout)
	for {
		err := n.askLeave(ctx)
		if err == nil || !n.inRaftConfig() {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.Join(errors.New("cluster: leave: the leader did not remove this node"), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *Node) askLeave(ctx context.Context) error {
	if n.IsLeader() {
		return n.removeServer(n.cfg.Name)
	}
	addr := n.leaderHTTP()
	if addr == "" {
		return ErrNoLeader
	}
	resp, err := n.internalCall(ctx, http.MethodPost, addr, "leave", leaveRequest{Name: n.cfg.Name})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var ar applyResponse
	_ = json.NewDecoder(resp.Body).Decode(&ar)
	if ar.Code != "" || ar.Error != "" {
		return decodeError(ar.Code, ar.Error)
	}
	return nil
}

func (n *Node) inRaftConfig() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.Name {
			return true
		}
	}
	return false
}
