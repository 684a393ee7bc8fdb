package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// GPUResetRequest is the body of POST /v1/nodes/{name}/gpus/reset: the
// devices to reset (none: every device the node's record shows unhealthy).
type GPUResetRequest struct {
	UUIDs []string `json:"uuids,omitempty"`
}

// GPUResetResponse says which devices were reset; none when the node had
// no unhealthy device. The node's agent clears their XID faults and its
// next detection (within seconds) publishes them healthy.
type GPUResetResponse struct {
	Node  string   `json:"node"`
	UUIDs []string `json:"uuids"`
	Index uint64   `json:"index,omitempty"` // the raft index of the reset (node.gpu_reset.index)
	By    string   `json:"by,omitempty"`
}

// resetNodeGPUs handles POST /v1/nodes/{name}/gpus/reset (leader only): an
// operator's health reset (fsm.ResetGPUs). Unknown names are refused before
// anything is written.
func (s *server) resetNodeGPUs(w http.ResponseWriter, r *http.Request) {
	var req GPUResetRequest
	if err := s.decodeOptional(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("name")
	d, err := s.nodeDetail(name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for i, u := range req.UUIDs {
		if !slices.ContainsFunc(d.GPUs, func(g fsm.GPU) bool { return g.UUID == u }) {
			s.writeError(w, r, invalid(fmt.Sprintf("uuids[%d]", i), "node %s has no GPU %q", name, u))
			return
		}
	}
	out := GPUResetResponse{Node: name, UUIDs: []string{}}
	if len(req.UUIDs) == 0 && !slices.ContainsFunc(d.GPUs, func(g fsm.GPU) bool { return !g.Healthy() }) {
		writeJSON(w, http.StatusOK, out) // nothing unhealthy: no entry at all
		return
	}
	res, err := s.apply(r.Context(), fsm.CmdResetGPUs, fsm.ResetGPUs{Name: name, UUIDs: req.UUIDs, By: requester(r)})
	if err != nil {
		s.writeError(w, r, fmt.Errorf("node %s: %w", name, err))
		return
	}
	if d, err = s.nodeDetail(name); err != nil {
		s.writeError(w, r, err)
		return
	}
	if gr := d.GPUReset; gr != nil && gr.Index == res.Index {
		out.UUIDs, out.Index, out.By = gr.UUIDs, gr.Index, gr.By
	}
	writeJSON(w, http.StatusOK, out)
}

// requester names who made r for an operator event: the ACL token's name
// (else its accessor); with ACL off, the address it came from (the first
// hop's when a follower forwarded it to the leader).
func requester(r *http.Request) string {
	id := identityOf(r)
	switch {
	case id == nil:
		addr := r.RemoteAddr
		if fwd := r.Header.Get("X-Forwarded-For"); fwd != "" {
			addr, _, _ = strings.Cut(fwd, ",")
		} else if h, _, err := net.SplitHostPort(addr); err == nil {
			addr = h
		}
		return "a request from " + strings.TrimSpace(addr)
	case id.internal || id.token == nil:
		return "the cluster"
	case id.token.Name != "":
		return "token " + id.token.Name
	}
	return "token " + id.token.AccessorID
}
