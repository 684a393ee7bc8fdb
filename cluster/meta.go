package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/memberlist"

	"github.com/foreman-sched/foreman/fsm"
)

// metaLimit is memberlist's hard limit on node meta.
const metaLimit = memberlist.MetaMaxSize

// nodeMeta is what a node gossips about itself. Keys are short because the
// whole record must fit in 512 bytes; the gossip address is memberlist's own
// Addr:Port and the name is the memberlist node name.
type nodeMeta struct {
	ClusterID string            `json:"c,omitempty"`
	HTTPAddr  string            `json:"h"`
	RaftAddr  string            `json:"r"`
	Version   string            `json:"v,omitempty"`
	CPU       int64             `json:"cpu,omitempty"`
	MemoryMB  int64             `json:"mem,omitempty"`
	Named     map[string]int64  `json:"n,omitempty"`
	Labels    map[string]string `json:"l,omitempty"`
	Drivers   []string          `json:"d,omitempty"`
	Slots     int               `json:"sl,omitempty"`
	JobUsers  []string          `json:"ju,omitempty"`
	Volumes   []metaVolume      `json:"vo,omitempty"`
	// Applied is this node's FSM applied index and Behind is set while the
	// node is not in sync with the leader (sync.go); the leader places
	// nothing on a node that is behind (NodesBehind). Neither is part of
	// the replicated node record.
	Applied uint64 `json:"ap,omitempty"`
	Behind  bool   `json:"b,omitempty"`
	// HasState is true once this node has raft state (bootstrapped or added
	// by a leader); bootstrap-expect counts only nodes without it.
	HasState bool `json:"s,omitempty"`
	// Leaving is set by Leave just before the gossip leave: memberlist's
	// leave event does not say whether a node left or died.
	Leaving bool `json:"x,omitempty"`
	// Replica: a raft non-voter that is never promoted (Config.Replica).
	Replica bool `json:"rp,omitempty"`
	// Features are the features beyond the baseline that this node's
	// build can apply (fsm/features.go), as bits: a few bytes however many
	// there are. A build from before them gossips none: the baseline.
	Features fsm.FeatureSet `json:"fe,omitempty"`
}

// metaVolume is fsm.HostVolume with short keys.
type metaVolume struct {
	Name     string `json:"n"`
	Path     string `json:"p"`
	ReadOnly bool   `json:"ro,omitempty"`
}

func metaVolumes(vs []fsm.HostVolume) []metaVolume {
	var out []metaVolume
	for _, v := range vs {
		out = append(out, metaVolume(v))
	}
	return out
}

func (m nodeMeta) volumes() []fsm.HostVolume {
	var out []fsm.HostVolume
	for _, v := range m.Volumes {
		out = append(out, fsm.HostVolume(v))
	}
	return out
}

func metaFromNode(n fsm.Node, clusterID string, hasState, leaving bool) nodeMeta {
	return nodeMeta{Volumes: metaVolumes(n.Volumes),
		ClusterID: clusterID, HTTPAddr: n.HTTPAddr, RaftAddr: n.RaftAddr, Version: n.Version,
		CPU: n.Capacity.CPU, MemoryMB: n.Capacity.MemoryMB, Named: n.Capacity.Named,
		Labels: n.Labels, Drivers: n.Drivers, Slots: n.Slots, JobUsers: n.JobUsers, HasState: hasState, Leaving: leaving,
		Replica: n.Role == fsm.RoleReplica,
	}
}

func (m nodeMeta) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > metaLimit {
		return nil, fmt.Errorf("%w: %d bytes encoded, the limit is %d (labels %d, drivers %d, volumes %d)", ErrMetaTooLarge, len(b), metaLimit, len(m.Labels), len(m.Drivers), len(m.Volumes))
	}
	return b, nil
}

func decodeMeta(b []byte) (nodeMeta, error) {
	var m nodeMeta
	if len(b) == 0 {
		return m, fmt.Errorf("empty node meta")
	}
	err := json.Unmarshal(b, &m)
	return m, err
}

// node turns a member's gossip into the self-description the leader commits
// with fsm.UpsertNode. Leader-owned fields stay zero.
func (m nodeMeta) node(name, gossipAddr string) fsm.Node {
	return fsm.Node{
		Name: name, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, GossipAddr: gossipAddr,
		Capacity: fsm.Resources{CPU: m.CPU, MemoryMB: m.MemoryMB, Named: m.Named},
		Labels:   m.Labels, Drivers: m.Drivers, Version: m.Version, Slots: m.Slots, JobUsers: m.JobUsers,
		Volumes: m.volumes(),
	}
}

func hostPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
