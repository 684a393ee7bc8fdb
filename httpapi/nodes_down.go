package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// NodesDownRequest is the body of POST /v1/nodes/down: which clients to
// declare dead at once (issue 38). Every given filter must match: Silent
// (shown silent: the leader holds their deaths), SilentFor (silent at
// least that long), Role (only "client": gossip decides a server's
// liveness), Labels (each key=value) and Names. At least one of Silent,
// Labels and Names is needed, so no empty filter takes the whole fleet.
// DryRun answers with the nodes and changes nothing.
type NodesDownRequest = api.NodesDownRequest

// NodesDownResponse names the nodes declared dead (or, with dry_run, that
// would be), in one raft entry at Index.
type NodesDownResponse = api.NodesDownResponse

// maxNodesDown bounds one bulk down (one raft entry).
const maxNodesDown = 20000

// nodesDown handles POST /v1/nodes/down (leader only; operator).
func (s *server) nodesDown(w http.ResponseWriter, r *http.Request) {
	var req NodesDownRequest
	body, err := s.readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	var names []string
	if err == nil {
		names, err = s.matchDown(&req)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := NodesDownResponse{Nodes: names, DryRun: req.DryRun}
	if !req.DryRun {
		p := fsm.SetNodeStates{}
		for _, n := range names {
			p.States = append(p.States, fsm.SetNodeState{Name: n, Gossip: fsm.NodeDead})
		}
		out.Index, err = s.setNodeStates(r.Context(), p)
	}
	s.reply(w, r, out, err)
}

// matchDown checks the filter and lists the clients it matches.
func (s *server) matchDown(req *NodesDownRequest) ([]string, error) {
	switch {
	case req.Role != "" && req.Role != fsm.RoleClient:
		return nil, invalid("role", "only client (got %q): gossip decides whether a server or a replica is alive", req.Role)
	case !req.Silent && len(req.Labels) == 0 && len(req.Names) == 0:
		return nil, invalid("silent", "give silent, labels or names: an empty filter would take every client")
	case req.SilentFor < 0:
		return nil, invalid("silent_for", "must not be negative")
	case req.SilentFor > 0 && !req.Silent:
		return nil, invalid("silent_for", "needs silent")
	}
	for k := range req.Labels {
		if k == "" {
			return nil, invalid("labels", "a label key is empty")
		}
	}
	now := s.clock.Now()
	var out []string
	err := s.state.View(func(tx *fsm.Tx) error {
		nodes, silent, err := shownNodes(tx)
		if err != nil {
			return err
		}
		named, missing := make(map[string]bool, len(req.Names)), make(map[string]bool, len(req.Names))
		for _, name := range req.Names {
			named[name], missing[name] = true, true
		}
		for i := range nodes {
			delete(missing, nodes[i].Name)
		}
		for _, name := range req.Names {
			if missing[name] {
				return invalid("names", "no node %q", name)
			}
		}
		for i := range nodes {
			n := &nodes[i]
			if len(named) > 0 && !named[n.Name] {
				continue
			}
			if !labelsMatch(n.Labels, req.Labels) {
				continue
			}
			if req.Silent {
				since, ok := silent[n.Name]
				if !ok || n.Gossip != fsm.NodeSilent || now.Sub(since) < time.Duration(req.SilentFor) {
					continue
				}
			}
			if n.Role != fsm.RoleClient {
				return invalid("names", "node %s is a raft member: gossip decides whether it is alive; the filter must match clients only", n.Name)
			}
			if n.Gossip == fsm.NodeDead || n.Gossip == fsm.NodeLeft {
				continue // already down
			}
			out = append(out, n.Name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		what := "no live client matches the filter"
		if req.Silent {
			what = "no client is silent (the leader holds no death)"
			if req.SilentFor > 0 {
				what = fmt.Sprintf("no client has been silent for %s", time.Duration(req.SilentFor))
			}
		}
		return nil, invalid(firstFilter(req), "%s: nothing changed", what)
	}
	if len(out) > maxNodesDown {
		return nil, invalid("names", "%d nodes match; at most %d at once", len(out), maxNodesDown)
	}
	return out, nil
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// firstFilter names the filter a "nothing matches" error is about.
func firstFilter(req *NodesDownRequest) string {
	switch {
	case req.Silent:
		return "silent"
	case len(req.Labels) > 0:
		return "labels"
	}
	return "names"
}
