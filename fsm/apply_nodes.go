package fsm

import (
	"errors"
	"fmt"
)

func (a *applier) initCluster(p *InitCluster, res *Result) error {
	if p.ClusterID == "" {
		return fmt.Errorf("%w: cluster_id: empty", ErrBadCommand)
	}
	if a.meta.Get(metaClusterID) != nil {
		return nil // the first InitCluster wins; later ones are no-ops
	}
	return a.put(a.meta, metaClusterID, []byte(p.ClusterID))
}

func (a *applier) leaderChanged(p *LeaderChanged, res *Result) error {
	if err := validKey("node", p.Node, maxIDLen); err != nil {
		return err
	}
	a.emit(Event{Type: EventLeader, Name: NameChanged, Node: p.Node, Term: p.Term})
	return nil
}

func (a *applier) getNode(name string) (*Node, error) {
	v := a.nodes.Get([]byte(name))
	return record[Node](v, "node", name)
}

// readNode is getNode for a caller that changes nothing in the record
// (placements read the node of each): a copy of the committed memo's
// record while this batch has written no node. Its maps and slices are
// the memo's and must not be modified. An entry placing a thousand jobs on
// a thousand clients decoded a thousand node records.
func (a *applier) readNode(name string) (*Node, error) {
	if len(a.nodeNames) > 0 || a.nodeMemo == nil {
		return a.getNode(name)
	}
	m, ok := memoNode(a.nodeMemo, name)
	if !ok {
		return nil, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	n := *m
	return &n, nil
}

// saveNode writes n and emits a node event named name.
func (a *applier) saveNode(n *Node, name string) error {
	n.ModifyIndex = a.index
	if err := a.putRecord(a.nodes, []byte(n.Name), n); err != nil {
		return err
	}
	a.emit(Event{Type: EventNode, Name: name, Node: n.Name, State: string(n.Gossip), Reason: string(n.Eligibility)})
	return nil
}

func (a *applier) upsertNode(p *UpsertNode, res *Result) error {
	n := p.Node
	if err := validKey("node.name", n.Name, maxIDLen); err != nil {
		return err
	}
	if n.Role != "" && n.Role != RoleClient && n.Role != RoleReplica {
		return fmt.Errorf("%w: node.role: %q (want %q, %q or empty)", ErrBadCommand, n.Role, RoleClient, RoleReplica)
	}
	if err := validGPUs("node.gpus", n.GPUs); err != nil {
		return err
	}
	if err := CheckHostVolumes("node.volumes", n.Volumes); err != nil {
		return fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	if !validGPUMemoryMode(n.GPUMemoryMode) {
		return fmt.Errorf("%w: node.gpu_memory_mode: %q", ErrBadCommand, n.GPUMemoryMode)
	}
	old, err := a.getNode(n.Name)
	name := NameUpdated
	var oldGPUs []GPU
	switch {
	case err == nil:
		oldGPUs = old.GPUs
		if p.KeepGPUs {
			n.GPUs, n.GPUDriver, n.CUDAVersion, n.GPUMemoryMode = old.GPUs, old.GPUDriver, old.CUDAVersion, old.GPUMemoryMode
		}
		if old.Gossip != NodeAlive {
			name = string(NodeAlive)
		}
		n.Eligibility, n.DrainDeadline = old.Eligibility, old.DrainDeadline
		n.GPUReset = old.GPUReset // the leader's, never the agent's
		n.StateChangedAt = old.StateChangedAt
		if old.Gossip != NodeAlive {
			n.StateChangedAt = a.at
		}
	case errors.Is(err, ErrNotFound):
		n.Eligibility, n.DrainDeadline, n.StateChangedAt = Eligible, zeroTime, a.at
		name = NameJoined
	default:
		return err
	}
	n.Gossip = NodeAlive
	if err := a.saveNode(&n, name); err != nil {
		return err
	}
	a.gpuEvents(&n, oldGPUs)
	return a.gpuErrorPolicy(&n, oldGPUs)
}

func validGossip(g GossipState) bool {
	switch g {
	case NodeAlive, NodeSuspect, NodeDead, NodeLeft:
		return true
	}
	return false
}

func validEligibility(e Eligibility) bool {
	switch e {
	case Eligible, Draining, Ineligible:
		return true
	}
	return false
}

func (a *applier) setNodeState(p *SetNodeState, res *Result) error {
	if p.Gossip != "" && !validGossip(p.Gossip) {
		return fmt.Errorf("%w: gossip: %q (want alive, suspect, dead or left)", ErrBadCommand, p.Gossip)
	}
	if p.Eligibility != "" && !validEligibility(p.Eligibility) {
		return fmt.Errorf("%w: eligibility: %q (want eligible, draining or ineligible)", ErrBadCommand, p.Eligibility)
	}
	n, err := a.getNode(p.Name)
	if err != nil {
		return err
	}
	name := NameUpdated
	if p.Eligibility != "" && p.Eligibility != n.Eligibility {
		name = string(p.Eligibility)
	}
	if p.Gossip != "" && p.Gossip != n.Gossip {
		n.Gossip, n.StateChangedAt = p.Gossip, a.at
		name = string(p.Gossip)
	}
	if p.Eligibility != "" {
		n.Eligibility = p.Eligibility
		n.DrainDeadline = zeroTime
		if p.Eligibility == Draining {
			n.DrainDeadline = p.DrainDeadline
		}
	}
	return a.saveNode(n, name)
}

// CmdNodeStates changes many nodes in one entry (an operator's bulk
// `node down`, issue 38): all of them or none.
const CmdNodeStates CommandType = "node_states" // SetNodeStates

// SetNodeStates is many SetNodeState, applied in order.
type SetNodeStates struct {
	States []SetNodeState `json:"states"`
}

func (a *applier) setNodeStates(p *SetNodeStates, res *Result) error {
	// Every refusal comes before the first write, so a refused entry
	// changes nothing.
	for i, st := range p.States {
		if (st.Gossip != "" && !validGossip(st.Gossip)) || (st.Eligibility != "" && !validEligibility(st.Eligibility)) {
			return fmt.Errorf("%w: states[%d]: gossip %q, eligibility %q", ErrBadCommand, i, st.Gossip, st.Eligibility)
		}
		if _, err := a.getNode(st.Name); err != nil {
			return fmt.Errorf("states[%d]: %w", i, err)
		}
	}
	for i := range p.States {
		if err := a.setNodeState(&p.States[i], res); err != nil {
			return err
		}
	}
	return nil
}
