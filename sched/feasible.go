package sched

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// nodeState is one node as the planner sees it: static properties plus the
// capacity still free, which shrinks as the plan places attempts.
type nodeState struct {
	node      *fsm.Node
	freeCPU   int64
	freeMem   int64
	freeNamed map[string]int64 // capacity minus allocated, per named resource
	// namedOwned: freeNamed is this state's own map; until then it is the
	// node record's (shared, read-only), copied at the first take.
	namedOwned bool
	attempts   int // live attempts, counting this plan's placements
	// gpuUsed[i]: node.GPUs[i] is held by a live attempt or this plan
	// (gpus.go); nil while none is.
	gpuUsed []bool
	// gpuShared[i]: MiB of node.GPUs[i] held by shares (gpu_share.go);
	// nil while none is.
	gpuShared []int64
}

// newNodeStates indexes nodes by name and subtracts what live attempts hold.
// Free capacity may start negative (a node that shrank); it then fits
// nothing, which is what "never over-commit" requires.
func newNodeStates(nodes []fsm.Node, live []fsm.Attempt) ([]nodeState, map[string]int) {
	return newNodeStatesIndexed(nodes, live, nil)
}

// newNodeStatesIndexed is newNodeStates with the name index of nodes
// (sorted by name) given: a 5,000-entry map built for every plan was most
// of a plan that had nothing to place.
func newNodeStatesIndexed(nodes []fsm.Node, live []fsm.Attempt, byName map[string]int) ([]nodeState, map[string]int) {
	if byName == nil || len(byName) != len(nodes) {
		return newNodeStatesSorted(nodes, live)
	}
	out := make([]nodeState, len(nodes))
	for i := range nodes {
		out[i] = newNodeState(&nodes[i])
	}
	takeLive(out, byName, live)
	return out, byName
}

func newNodeState(n *fsm.Node) nodeState {
	return nodeState{node: n, freeCPU: n.Capacity.CPU, freeMem: n.Capacity.MemoryMB, freeNamed: n.Capacity.Named}
}

// ownNamed gives the state its own freeNamed before a change.
func (ns *nodeState) ownNamed() {
	if !ns.namedOwned {
		ns.freeNamed = copyNamed(ns.freeNamed)
		if ns.freeNamed == nil {
			ns.freeNamed = map[string]int64{}
		}
		ns.namedOwned = true
	}
}

// takeLive subtracts what live attempts hold from their nodes.
func takeLive(out []nodeState, byName map[string]int, live []fsm.Attempt) {
	for i := range live {
		a := &live[i]
		if ni, ok := byName[a.Node]; ok {
			out[ni].take(&a.Resources)
			if len(a.GPUs) > 0 {
				out[ni].markGPUs(attemptGPUUUIDs(a.GPUs), true)
			}
			if s := a.GPUShare; s != nil {
				out[ni].markShare(s.GPU.UUID, s.MemoryMiB)
			}
		}
	}
}

// newNodeStatesSorted builds the states and their index from nodes in any
// order.
func newNodeStatesSorted(nodes []fsm.Node, live []fsm.Attempt) ([]nodeState, map[string]int) {
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	// Sort by name so the plan does not depend on the reader's order.
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(nodes[a].Name, nodes[b].Name) })
	out := make([]nodeState, len(nodes))
	byName := make(map[string]int, len(nodes))
	for i, oi := range order {
		out[i] = newNodeState(&nodes[oi])
		byName[nodes[oi].Name] = i
	}
	takeLive(out, byName, live)
	return out, byName
}

// nodeIndexCache keeps the name index of the last node list it was given,
// for as long as it is given the same list: fsm's NodesShared returns the
// same slice until a node record changes, and the cache's reference keeps
// that array's address from being reused.
type nodeIndexCache struct {
	first *fsm.Node
	n     int
	idx   map[string]int
	down  []int // positions of the nodes neither alive nor suspect
}

// notAlive returns the positions in nodes of those neither alive nor
// suspect (the only ones lost detection asks the leader about), kept while
// nodes is the same list: with thousands of clients, walking every record
// for its gossip state was a twentieth of the leader's CPU under submits.
func (c *nodeIndexCache) notAlive(nodes []fsm.Node) []int {
	if len(nodes) == 0 {
		return nil
	}
	c.get(nodes)
	return c.down
}

// get returns the index of nodes, nil when they are not sorted by name.
func (c *nodeIndexCache) get(nodes []fsm.Node) map[string]int {
	if len(nodes) == 0 {
		return nil
	}
	if c.first == &nodes[0] && c.n == len(nodes) {
		return c.idx
	}
	var idx map[string]int
	var down []int
	for i := range nodes {
		if g := nodes[i].Gossip; g != fsm.NodeAlive && g != fsm.NodeSuspect {
			down = append(down, i)
		}
	}
	if slices.IsSortedFunc(nodes, func(a, b fsm.Node) int { return strings.Compare(a.Name, b.Name) }) {
		idx = make(map[string]int, len(nodes))
		for i := range nodes {
			idx[nodes[i].Name] = i
		}
		if len(idx) != len(nodes) { // a name twice: let Plan index them as before
			idx = nil
		}
	}
	c.first, c.n, c.idx, c.down = &nodes[0], len(nodes), idx, down
	return idx
}

// take subtracts a request from the node's free capacity.
func (ns *nodeState) take(r *fsm.Resources) {
	ns.attempts++
	ns.freeCPU -= r.CPU
	ns.freeMem -= r.MemoryMB
	for k, v := range r.Named {
		ns.ownNamed()
		ns.freeNamed[k] -= v
	}
}

// fitsClass is fits plus the devices of a GPU request.
func (ns *nodeState) fitsClass(r *fsm.Resources, cl *class) bool {
	return ns.fits(r) && ns.gpuFits(r, cl.cons)
}

// fits is the hot path: does the request fit the free capacity?
func (ns *nodeState) fits(r *fsm.Resources) bool {
	if s := ns.node.Slots; s > 0 && ns.attempts >= s {
		return false
	}
	if r.CPU > ns.freeCPU || r.MemoryMB > ns.freeMem {
		return false
	}
	for k, v := range r.Named {
		if v > 0 && v > ns.freeNamed[k] {
			return false
		}
	}
	return true
}

// misfit explains why a request does not fit ("" if it does). It separates
// "insufficient" (busy now) from "exceeds node capacity" (never fits).
func (ns *nodeState) misfit(r *fsm.Resources) string {
	c := &ns.node.Capacity
	switch {
	case ns.node.Slots > 0 && ns.attempts >= ns.node.Slots:
		return "insufficient slots"
	case r.CPU > ns.freeCPU:
		return dimReason("cpu", r.CPU > c.CPU)
	case r.MemoryMB > ns.freeMem:
		return dimReason("memory", r.MemoryMB > c.MemoryMB)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Named)) {
		if v := r.Named[k]; v > 0 && v > ns.freeNamed[k] {
			return dimReason(k, v > c.Named[k])
		}
	}
	return ""
}

func dimReason(dim string, tooBig bool) string {
	if tooBig {
		return dim + " exceeds node capacity"
	}
	return "insufficient " + dim
}

// staticMisfit checks what does not change during a plan: liveness,
// eligibility, driver, job user (the node's --job-users) and constraints.
// It returns "" for a usable node.
func staticMisfit(n *fsm.Node, behind bool, driver, user string, cons []fsm.Constraint, vols []fsm.VolumeMount) string {
	if n.Gossip != fsm.NodeAlive {
		return "node " + string(n.Gossip)
	}
	if behind {
		return "node behind the leader's log"
	}
	if n.Eligibility != fsm.Eligible {
		return "node " + string(n.Eligibility)
	}
	if driver == "" {
		if len(n.Drivers) == 0 {
			return "no drivers"
		}
	} else if !slices.Contains(n.Drivers, driver) {
		return "driver " + driver + " unavailable"
	}
	if !n.AllowsJobUser(user) {
		name, _, _ := strings.Cut(user, ":")
		return "user " + name + " not in --job-users"
	}
	if v := n.MissingVolume(vols); v != "" {
		return "no volume " + v
	}
	for _, c := range cons {
		if c.IsGPU() {
			continue // per device: below
		}
		if c.Match(n.Labels) {
			continue
		}
		if _, ok := n.Labels[c.Key]; !ok && c.NeedsLabel() {
			return "missing label " + c.Key
		}
		return "unmet " + c.String()
	}
	if hasGPUConstraint(cons) && len(fsm.GPUsMatching(n.GPUs, cons)) == 0 {
		return "no GPU matching " + gpuConstraintText(cons)
	}
	return ""
}

// class groups jobs that have the same static requirements (driver, user
// and constraints): they share the list of usable nodes and a scan cursor.
type class struct {
	nodes  []int          // statically feasible node indices
	static map[string]int // why the other nodes were rejected
	err    string         // set when the constraints do not parse
	cursor int            // index into nodes where the next scan starts
	cons   []fsm.Constraint
}

func classKey(s *fsm.JobSpec) string {
	k := s.Driver
	if s.User != "" {
		k += "\x01" + s.User
	}
	for _, v := range s.Volumes {
		k += "\x02" + v.Name
	}
	if len(s.Constraints) == 0 {
		return k
	}
	return k + "\x00" + strings.Join(s.Constraints, "\x00")
}

func newClass(nodes []nodeState, behind map[string]bool, s *fsm.JobSpec) *class {
	cl := &class{static: map[string]int{}}
	cons, err := fsm.ParseConstraints(s.Constraints)
	if err != nil {
		// The API validates constraints; this guards old or hand-made entries.
		cl.err = err.Error()
		return cl
	}
	cl.cons = cons
	for i := range nodes {
		if r := staticMisfit(nodes[i].node, behind[nodes[i].node.Name], s.Driver, s.User, cons, s.Volumes); r != "" {
			cl.static[r]++
			continue
		}
		cl.nodes = append(cl.nodes, i)
	}
	return cl
}

// maxReasons bounds how many categories a reason lists.
const maxReasons = 4

// formatReason renders per-node rejection counts, most common first:
// "3 nodes: 2 insufficient memory, 1 missing label gpu_model".
func formatReason(total int, counts map[string]int) string {
	if total == 0 {
		return "no nodes"
	}
	type rc struct {
		r string
		n int
	}
	list := make([]rc, 0, len(counts))
	for r, n := range counts {
		list = append(list, rc{r, n})
	}
	slices.SortFunc(list, func(a, b rc) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.r, b.r)
	})
	var b strings.Builder
	noun := "nodes"
	if total == 1 {
		noun = "node"
	}
	fmt.Fprintf(&b, "%d %s: ", total, noun)
	for i, x := range list {
		if i == maxReasons {
			fmt.Fprintf(&b, ", %d more reasons", len(list)-maxReasons)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", x.n, x.r)
	}
	return b.String()
}
