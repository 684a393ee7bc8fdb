package httpapi

import (
	"net/http"
	"sort"
	"strings"

	"github.com/foreman-sched/foreman/api"
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

func (s *server) raftInfo(w http.ResponseWriter, r *http.Request) {
	info := s.cluster.RaftInfo()
	if info.AppliedIndex == 0 {
		info.AppliedIndex = s.state.AppliedIndex()
	}
	writeJSON(w, http.StatusOK, info)
}

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
