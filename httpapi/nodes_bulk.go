package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// Bulk drain and eligibility (issue 38): POST /v1/nodes/drain and POST
// /v1/nodes/eligibility change every node a filter matches in one raft
// entry (fsm.CmdNodeStates: all of them or none), as POST /v1/nodes/down
// declares many clients dead. Unlike a down they take servers and
// replicas too: eligibility is the scheduler's, not gossip's.

// NodesDrainRequest is the body of POST /v1/nodes/drain.
type NodesDrainRequest = api.NodesDrainRequest

// NodesEligibilityRequest is the body of POST /v1/nodes/eligibility.
type NodesEligibilityRequest = api.NodesEligibilityRequest

// NodesChangeResponse is the reply to both.
type NodesChangeResponse = api.NodesChangeResponse

// nodeFilter is what the bulk changes select nodes by.
type nodeFilter struct {
	role   string
	labels map[string]string
	names  []string
}

// check refuses a filter that names no role this cluster has, an empty
// label key, or no labels and no names (which would take every node).
func (f nodeFilter) check() error {
	switch f.role {
	case "", "server", fsm.RoleReplica, fsm.RoleClient:
	default:
		return invalid("role", "must be server, replica or client (got %q)", f.role)
	}
	for k := range f.labels {
		if k == "" {
			return invalid("labels", "a label key is empty")
		}
	}
	if len(f.labels) == 0 && len(f.names) == 0 {
		return invalid("labels", "give labels or names: an empty filter would take every node")
	}
	return nil
}

// match lists the nodes f selects, by name; a name that is no node is a
// 400, and so is a filter that matches none.
func (s *server) match(f nodeFilter) ([]fsm.Node, error) {
	var out []fsm.Node
	err := s.state.View(func(tx *fsm.Tx) error {
		nodes, err := tx.Nodes()
		if err != nil {
			return err
		}
		named, missing := make(map[string]bool, len(f.names)), make(map[string]bool, len(f.names))
		for _, name := range f.names {
			named[name], missing[name] = true, true
		}
		for _, n := range nodes {
			delete(missing, n.Name)
			if len(named) > 0 && !named[n.Name] || !labelsMatch(n.Labels, f.labels) || !roleMatch(n.Role, f.role) {
				continue
			}
			out = append(out, n)
		}
		for _, name := range f.names {
			if missing[name] {
				return invalid("names", "no node %q", name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		field := "labels"
		if len(f.labels) == 0 {
			field = "names"
		}
		return nil, invalid(field, "no node matches the filter: nothing changed")
	}
	if len(out) > maxNodesDown {
		return nil, invalid("labels", "%d nodes match; at most %d at once", len(out), maxNodesDown)
	}
	return out, nil
}

// roleMatch: a server's record has no role ("server" selects it).
func roleMatch(have, want string) bool {
	switch want {
	case "":
		return true
	case "server":
		return have == ""
	}
	return have == want
}

// nodesDrain handles POST /v1/nodes/drain (leader only; operator).
func (s *server) nodesDrain(w http.ResponseWriter, r *http.Request) {
	var req NodesDrainRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.drainState(time.Duration(req.Deadline))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A node draining already is drained again: its deadline is the new one.
	s.nodesChange(w, r, nodeFilter{req.Role, req.Labels, req.Names}, req.DryRun, st, func(fsm.Node) bool { return true })
}

// nodesEligibility handles POST /v1/nodes/eligibility (leader only;
// operator).
func (s *server) nodesEligibility(w http.ResponseWriter, r *http.Request) {
	var req NodesEligibilityRequest
	err := s.decodeBody(w, r, &req)
	e := fsm.Eligibility(req.Eligibility)
	if err == nil {
		err = checkEligibility(e, "POST /v1/nodes/drain to drain nodes")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.nodesChange(w, r, nodeFilter{req.Role, req.Labels, req.Names}, req.DryRun, fsm.SetNodeState{Eligibility: e},
		func(n fsm.Node) bool { return n.Eligibility != e })
}

// nodesChange applies st to every node f matches for which changes
// holds, in one raft entry, and replies with them and the rest.
func (s *server) nodesChange(w http.ResponseWriter, r *http.Request, f nodeFilter, dryRun bool, st fsm.SetNodeState, changes func(fsm.Node) bool) {
	err := f.check()
	var nodes []fsm.Node
	if err == nil {
		nodes, err = s.match(f)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := NodesChangeResponse{Nodes: []string{}, DryRun: dryRun}
	p := fsm.SetNodeStates{}
	for _, n := range nodes {
		if !changes(n) {
			out.Unchanged = append(out.Unchanged, n.Name)
			continue
		}
		out.Nodes = append(out.Nodes, n.Name)
		st.Name = n.Name
		p.States = append(p.States, st)
	}
	if !dryRun && len(p.States) > 0 {
		out.Index, err = s.setNodeStates(r.Context(), p)
	}
	s.reply(w, r, out, err)
}

// setNodeStates applies p in one raft entry and returns its index.
func (s *server) setNodeStates(ctx context.Context, p fsm.SetNodeStates) (uint64, error) {
	res, err := s.apply(ctx, fsm.CmdNodeStates, p)
	if err != nil {
		return 0, err
	}
	return res.Index, nil
}
