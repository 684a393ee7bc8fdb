package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// MemberList is the reply to GET /v1/cluster/members.
type MemberList struct {
	Members []Member `json:"members"`
}

// JoinRequest is the body of POST /v1/cluster/join.
type JoinRequest struct {
	Addrs []string `json:"addrs"`
}

// HashResponse is the reply to GET /v1/cluster/hash: this node's state
// hash at its applied index. Nodes at the same index must agree.
type HashResponse = api.HashResponse

// StatusResponse is the reply to /v1/health and /v1/ready.
type StatusResponse struct {
	Status string `json:"status"`
	Node   string `json:"node"`
	Leader string `json:"leader,omitempty"`
}

func (s *server) members(w http.ResponseWriter, r *http.Request) {
	ms := s.cluster.Members()
	if ms == nil {
		ms = []Member{}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	writeJSON(w, http.StatusOK, MemberList{Members: ms})
}

// raftInfo is this node's raft state, with the leader's view of each
// server (its clients, when it last answered) on every node: a follower
// asks the leader for those (issue 38), so no page shows a server's
// clients unknown because of where it was opened. When the leader cannot
// be asked they stay unknown (absent), never guessed.
func (s *server) raftInfo(w http.ResponseWriter, r *http.Request) {
	info := s.cluster.RaftInfo()
	if info.AppliedIndex == 0 {
		info.AppliedIndex = s.state.AppliedIndex()
	}
	addFeatures(&info, s.cluster.FeatureGate())
	if !s.cluster.IsLeader() && r.Header.Get(HeaderForwarded) == "" {
		if err := s.leaderServers(r, &info); err != nil {
			s.log.DebugContext(r.Context(), "the leader's view of the servers is unknown here", "err", err)
		}
	}
	writeJSON(w, http.StatusOK, info)
}

// addFeatures shows the gate: each server's version and features, and the
// features enabled or held back with the servers lacking them.
func addFeatures(info *RaftInfo, g fsm.FeatureGate) {
	byID := make(map[string]fsm.ServerFeatures, len(g.Servers))
	for _, srv := range g.Servers {
		byID[srv.ID] = srv
	}
	for i := range info.Servers {
		if srv, ok := byID[info.Servers[i].ID]; ok {
			info.Servers[i].Version, info.Servers[i].Features = srv.Version, srv.Features.Names()
		}
	}
	enabled := g.Enabled()
	cf := &api.ClusterFeatures{Enabled: enabled.Names()}
	if cf.Enabled == nil {
		cf.Enabled = []string{}
	}
	for _, f := range fsm.Features {
		if enabled&f.Set != 0 {
			continue
		}
		h := api.HeldFeature{Name: f.Name}
		for _, srv := range g.Lacking(f.Set) {
			h.Lacking = append(h.Lacking, srv.String())
		}
		cf.Held = append(cf.Held, h)
	}
	info.Features = cf
}

// leaderServers fills each server's Clients and LastHeardAgo from the
// leader's GET /v1/cluster/raft, asked with the caller's credential.
func (s *server) leaderServers(r *http.Request, info *RaftInfo) error {
	_, addr := s.cluster.Leader()
	if addr == "" {
		return ErrNoLeader
	}
	ctx, cancel := context.WithTimeout(r.Context(), leaderViewTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.scheme+"://"+addr+"/v1/cluster/raft", nil)
	if err != nil {
		return err
	}
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	req.Header.Set(HeaderForwarded, "1")
	req.Header.Set(HeaderRequestID, requestID(r))
	resp, err := (&http.Client{Transport: s.transport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("leader %s: %s", addr, resp.Status)
	}
	var lead RaftInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&lead); err != nil {
		return fmt.Errorf("leader %s: %w", addr, err)
	}
	if lead.State != "Leader" {
		return fmt.Errorf("leader %s answers as %s", addr, lead.State)
	}
	byID := make(map[string]RaftServer, len(lead.Servers))
	for _, srv := range lead.Servers {
		byID[srv.ID] = srv
	}
	for i := range info.Servers {
		if l, ok := byID[info.Servers[i].ID]; ok {
			info.Servers[i].Clients, info.Servers[i].LastHeardAgo = l.Clients, l.LastHeardAgo
		}
	}
	return nil
}

// leaderViewTimeout bounds the follower's question to the leader: past
// it, the answer goes without the leader's view.
const leaderViewTimeout = 2 * time.Second

// join handles POST /v1/cluster/join on the node that should join; it is
// not forwarded, because the node that joins is the one asked.
func (s *server) join(w http.ResponseWriter, r *http.Request) {
	var req JoinRequest
	err := s.decodeBody(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Addrs) == 0 {
		s.writeError(w, r, invalid("addrs", "must name at least one host[:port] of a cluster member"))
		return
	}
	for i, a := range req.Addrs {
		if strings.TrimSpace(a) == "" || strings.ContainsAny(a, " \t/") {
			s.writeError(w, r, invalid("addrs", "entry %d (%q) is not a host[:port]", i, a))
			return
		}
	}
	if err := s.cluster.Join(req.Addrs); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, StatusResponse{Status: "joined", Node: s.cluster.NodeName()})
}

// leave handles POST /v1/cluster/leave: this node leaves gracefully.
func (s *server) leave(w http.ResponseWriter, r *http.Request) {
	if err := s.cluster.Leave(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, StatusResponse{Status: "left", Node: s.cluster.NodeName()})
}

func (s *server) hash(w http.ResponseWriter, r *http.Request) {
	idx, h, err := s.state.StateHash()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, HashResponse{Node: s.cluster.NodeName(), Index: idx, Hash: h})
}

// health says the process is up; it never looks at the cluster.
func (s *server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, StatusResponse{Status: "ok", Node: s.cluster.NodeName()})
}

// ready is 200 once a leader is known and this node has caught up.
func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	leader, _ := s.cluster.Leader()
	if err := s.cluster.Ready(); err != nil {
		status, code := statusFor(err)
		if status != http.StatusServiceUnavailable {
			status, code = http.StatusServiceUnavailable, CodeNotReady
		}
		writeJSON(w, status, ErrorBody{Error: "not ready: " + err.Error(), Code: code})
		return
	}
	writeJSON(w, http.StatusOK, StatusResponse{Status: "ready", Node: s.cluster.NodeName(), Leader: leader})
}
