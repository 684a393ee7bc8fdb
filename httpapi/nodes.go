package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// NodeView is a node with what is placed on it.
type NodeView struct {
	fsm.Node
	// Allocated sums the resources of the node's live attempts.
	Allocated fsm.Resources `json:"allocated"`
	// Running counts the node's live (assigned or running) attempts.
	Running int `json:"running"`
	// SilentSince is set for a client shown "silent" (gossip): silent
	// since then, its death held by the leader's mass-silence guard
	// (fsm/silent.go); its record and attempts are untouched.
	SilentSince *time.Time `json:"silent_since,omitempty"`
}

// NodeList is the reply to GET /v1/nodes.
type NodeList struct {
	Nodes []NodeView `json:"nodes"`
	// Summary counts every node, whatever the filters, by role and state.
	Summary NodeSummary `json:"summary"`
	// NextCursor, when set, is the cursor of the next page (limit reached).
	NextCursor string `json:"next_cursor,omitempty"`
}

// NodeSummary counts nodes: a fleet of thousands is read at a glance.
type NodeSummary = api.NodeSummary

// NodeQuery filters and pages GET /v1/nodes (zero fields: every node).
type NodeQuery struct {
	Role   string // "server", "replica" or "client"
	State  string // alive, suspect, dead or left
	Name   string // prefix
	Limit  int    // at most this many (0: all)
	Cursor string // the NextCursor of the previous page
}

// maxNodePage bounds ?limit.
const maxNodePage = 10000

// nodeRole is the role GET /v1/nodes shows and filters by.
func nodeRole(n *fsm.Node) string {
	if n.Role == "" {
		return "server"
	}
	return n.Role
}

func parseNodeQuery(r *http.Request) (NodeQuery, error) {
	v := r.URL.Query()
	q := NodeQuery{Role: v.Get("role"), State: v.Get("state"), Name: v.Get("name"), Cursor: v.Get("cursor")}
	switch q.Role {
	case "", "server", fsm.RoleReplica, fsm.RoleClient:
	default:
		return q, invalid("role", "must be server, replica or client (got %q)", q.Role)
	}
	switch fsm.GossipState(q.State) {
	case "", fsm.NodeAlive, fsm.NodeSuspect, fsm.NodeDead, fsm.NodeLeft, fsm.NodeSilent:
	default:
		return q, invalid("state", "must be alive, suspect, silent, dead or left (got %q)", q.State)
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxNodePage {
			return q, invalid("limit", "must be a number from 1 to %d (got %q)", maxNodePage, l)
		}
		q.Limit = n
	}
	return q, nil
}

// NodeDetail is the reply to GET /v1/nodes/{name} (and to drain and
// eligibility changes).
type NodeDetail struct {
	NodeView
	Attempts []fsm.Attempt `json:"attempts"` // the live ones
}

// NodeUsage is the reply to GET /v1/nodes/{name}/usage: what the node's
// jobs use now, measured by that node from its jobs cgroup (the numbers
// behind its foreman_node_used_* metrics). A value that node cannot
// measure (no jobs cgroup) is absent. CPU is a counter: a rate needs two
// readings (CPU cores used = Δcpu_seconds_total / Δat).
type NodeUsage = api.NodeUsage

// DrainRequest is the body of POST /v1/nodes/{name}/drain. Deadline (a
// duration from now) is how long running attempts may keep running; after
// it they are stopped. Absent: they run to completion.
type DrainRequest struct {
	Deadline fsm.Duration `json:"deadline,omitempty"`
}

// EligibilityRequest is the body of POST /v1/nodes/{name}/eligibility.
type EligibilityRequest struct {
	Eligibility fsm.Eligibility `json:"eligibility"`
}

// listNodes handles GET /v1/nodes?role=&state=&name=&limit=&cursor=:
// the nodes sorted by name, filtered, a page at a time, with a summary of
// them all.
func (s *server) listNodes(w http.ResponseWriter, r *http.Request) {
	q, err := parseNodeQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := NodeList{Nodes: []NodeView{}, Summary: NodeSummary{ByRole: map[string]int{}, ByState: map[string]int{}}}
	err = s.state.View(func(tx *fsm.Tx) error {
		nodes, silent, err := shownNodes(tx)
		if err != nil {
			return err
		}
		for i := range nodes {
			n := &nodes[i]
			out.Summary.Total++
			out.Summary.ByRole[nodeRole(n)]++
			out.Summary.ByState[string(n.Gossip)]++
			if (q.Role != "" && nodeRole(n) != q.Role) || (q.State != "" && string(n.Gossip) != q.State) ||
				!strings.HasPrefix(n.Name, q.Name) || (q.Cursor != "" && n.Name <= q.Cursor) {
				continue
			}
			if q.Limit > 0 && len(out.Nodes) == q.Limit {
				out.NextCursor = out.Nodes[len(out.Nodes)-1].Name
				continue
			}
			v, _, err := nodeView(tx, *n, silent)
			if err != nil {
				return err
			}
			out.Nodes = append(out.Nodes, v)
		}
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// nodeUsage handles GET /v1/nodes/{name}/usage: measured here for this
// node, proxied to the node otherwise (only it can read its cgroup).
func (s *server) nodeUsage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name != s.cluster.NodeName() {
		var addr string
		err := s.state.View(func(tx *fsm.Tx) error {
			n, err := tx.Node(name)
			if err != nil {
				return err
			}
			addr = n.HTTPAddr
			return nil
		})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.proxy(w, r, name, addr)
		return
	}
	out := NodeUsage{Node: name, At: s.clock.Now().UTC()}
	if s.usage != nil {
		cpu, mem, cpuOK, memOK := s.usage.NodeUsage(name)
		if cpuOK {
			out.CPUSecondsTotal = &cpu
		}
		if memOK {
			m := int64(mem)
			out.MemoryBytes = &m
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) nodeDetail(name string) (*NodeDetail, error) {
	var d NodeDetail
	err := s.state.View(func(tx *fsm.Tx) error {
		n, err := tx.Node(name)
		if err != nil {
			return err
		}
		silent, err := tx.SilentClients()
		if err != nil {
			return err
		}
		d.NodeView, d.Attempts, err = nodeView(tx, fsm.ShowSilent([]fsm.Node{*n}, silent)[0], silent)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// shownNodes is every node as the API shows it: the clients whose silence
// the leader holds as silent (fsm.ShowSilent), with that set.
func shownNodes(tx *fsm.Tx) ([]fsm.Node, map[string]time.Time, error) {
	nodes, err := tx.Nodes()
	if err != nil {
		return nil, nil, err
	}
	silent, err := tx.SilentClients()
	if err != nil {
		return nil, nil, err
	}
	return fsm.ShowSilent(nodes, silent), silent, nil
}

// nodeView adds the node's live attempts and their allocation.
func nodeView(tx *fsm.Tx, n fsm.Node, silent map[string]time.Time) (NodeView, []fsm.Attempt, error) {
	v := NodeView{Node: n}
	if since, ok := silent[n.Name]; ok && n.Gossip == fsm.NodeSilent {
		v.SilentSince = &since
	}
	live := []fsm.Attempt{}
	err := tx.LiveAttemptsOnNode(n.Name, func(a *fsm.Attempt) bool {
		live = append(live, *a)
		v.Allocated.CPU += a.Resources.CPU
		v.Allocated.MemoryMB += a.Resources.MemoryMB
		v.Allocated.GPUMemoryMiB += a.Resources.GPUMemoryMiB
		for k, q := range a.Resources.Named {
			if v.Allocated.Named == nil {
				v.Allocated.Named = map[string]int64{}
			}
			v.Allocated.Named[k] += q
		}
		return true
	})
	v.Running = len(live)
	return v, live, err
}

// drainNode handles POST /v1/nodes/{name}/drain (leader only).
func (s *server) drainNode(w http.ResponseWriter, r *http.Request) {
	var req DrainRequest
	if err := s.decodeOptional(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.drainState(req.Deadline.D())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st.Name = r.PathValue("name")
	s.nodeChange(w, r, st)
}

// drainState is the change that drains a node with deadline d from now
// (0: none), or why d is refused.
func (s *server) drainState(d time.Duration) (fsm.SetNodeState, error) {
	if d < 0 {
		return fsm.SetNodeState{}, invalid("deadline", "must not be negative (got %s)", d)
	}
	st := fsm.SetNodeState{Eligibility: fsm.Draining}
	if d > 0 {
		st.DrainDeadline = s.clock.Now().Add(d).UTC()
	}
	return st, nil
}

// checkEligibility refuses an eligibility other than eligible and
// ineligible; drain says how to drain instead.
func checkEligibility(e fsm.Eligibility, drain string) error {
	switch e {
	case fsm.Eligible, fsm.Ineligible:
		return nil
	case fsm.Draining:
		return invalid("eligibility", "use %s", drain)
	default:
		return invalid("eligibility", "must be eligible or ineligible (got %q)", e)
	}
}

// setEligibility handles POST /v1/nodes/{name}/eligibility (leader only).
// Draining has its own endpoint because it carries a deadline.
func (s *server) setEligibility(w http.ResponseWriter, r *http.Request) {
	var req EligibilityRequest
	err := s.decodeBody(w, r, &req)
	if err == nil {
		err = checkEligibility(req.Eligibility, "POST /v1/nodes/{name}/drain to drain a node")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.nodeChange(w, r, fsm.SetNodeState{Name: r.PathValue("name"), Eligibility: req.Eligibility})
}

// markDown handles POST /v1/nodes/{name}/down (leader only): an operator
// declares a client dead, as its silence would, without waiting for the
// mass-silence guard, which holds the deaths of clients that fell silent
// together until an operator acts (cluster/DESIGN.md "Clients"). Its
// attempts are declared lost once the lease has run out since the leader
// last heard from it; a client that is in fact up and beating is committed
// alive again by the leader. A raft member's liveness is gossip's.
func (s *server) markDown(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d, err := s.nodeDetail(name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if d.Role != fsm.RoleClient {
		s.writeError(w, r, fmt.Errorf("%w: node %s is a raft member: gossip decides whether it is alive (stop its agent, or remove it with foreman cluster raft remove-peer)", fsm.ErrConflict, name))
		return
	}
	s.nodeChange(w, r, fsm.SetNodeState{Name: name, Gossip: fsm.NodeDead})
}

// nodeChange applies a SetNodeState for a node that must exist and replies
// with the node.
func (s *server) nodeChange(w http.ResponseWriter, r *http.Request, cmd fsm.SetNodeState) {
	if _, err := s.nodeDetail(cmd.Name); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.apply(r.Context(), fsm.CmdNodeState, cmd); err != nil {
		s.writeError(w, r, fmt.Errorf("node %s: %w", cmd.Name, err))
		return
	}
	d, err := s.nodeDetail(cmd.Name)
	s.reply(w, r, d, err)
}
