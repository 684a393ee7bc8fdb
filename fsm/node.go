package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// GossipState is the liveness of a node as the leader last committed it.
type GossipState string

const (
	NodeAlive   GossipState = "alive"
	NodeSuspect GossipState = "suspect"
	NodeDead    GossipState = "dead"
	NodeLeft    GossipState = "left"
)

// NodeSilent is a shown state, never stored in a record: a client whose
// record is alive but whose silence the leader holds (silent.go). The API
// and the scheduler show and treat it so.
const NodeSilent GossipState = "silent"

// ShowSilent returns nodes with those in silent (client name → since) that
// are alive or suspect shown as NodeSilent, copying the slice only when one
// changes (nodes may be shared: it is never modified).
func ShowSilent(nodes []Node, silent map[string]time.Time) []Node {
	if len(silent) == 0 {
		return nodes
	}
	out := nodes
	for i := range nodes {
		if _, ok := silent[nodes[i].Name]; !ok || (nodes[i].Gossip != NodeAlive && nodes[i].Gossip != NodeSuspect) {
			continue
		}
		if &out[0] == &nodes[0] {
			out = slices.Clone(nodes)
		}
		out[i].Gossip = NodeSilent
	}
	return out
}

// Node.Role values (cluster/DESIGN.md "Clients"): a client is an agent
// outside raft; a replica a raft non-voter that is never promoted.
const (
	RoleClient  = "client"
	RoleReplica = "replica"
)

// Eligibility says whether a node may receive new attempts.
type Eligibility string

const (
	Eligible   Eligibility = "eligible"
	Draining   Eligibility = "draining"
	Ineligible Eligibility = "ineligible"
)

// Node is the replicated record of one agent. Capacity, labels, drivers and
// addresses come from the agent itself (through gossip); Gossip and
// Eligibility are decided by the leader and by users.
type Node struct {
	Name       string            `json:"name"`
	HTTPAddr   string            `json:"http_addr"`   // host:port of the API
	RaftAddr   string            `json:"raft_addr"`   // host:port
	GossipAddr string            `json:"gossip_addr"` // host:port
	Capacity   Resources         `json:"capacity"`
	Labels     map[string]string `json:"labels,omitempty"`
	Drivers    []string          `json:"drivers,omitempty"`
	Version    string            `json:"version,omitempty"`
	// Slots bounds the live attempts on the node (its supervisors): the
	// scheduler places nothing beyond it, the excess stays queued
	// (0 = unbounded, as nodes before slots existed).
	Slots int `json:"slots,omitempty"`
	// JobUsers is the node's --job-users: the users a job may name in
	// user: to run there ("*" = any). The scheduler places a job naming a
	// user only on nodes that allow it. Nil: the node does not restrict
	// (an agent not running as root, or one from before this field).
	JobUsers []string `json:"job_users,omitempty"`
	// Volumes are the host directories the node lends to jobs by name
	// (--host-volume; volume.go).
	Volumes []HostVolume `json:"volumes,omitempty"`
	// Role is RoleClient for an agent outside raft (it learns its work from
	// a server's work stream and the leader hears it through its beats),
	// RoleReplica for a raft non-voter that is never promoted, "" for a
	// server (gossip carries the liveness of both).
	Role string `json:"role,omitempty"`
	// GPUs are the devices detection found on the node (gpu.go), by Index.
	GPUs []GPU `json:"gpus,omitempty"`
	// GPUDriver and CUDAVersion are the NVIDIA driver's version and the
	// highest CUDA version it supports, as detection found them.
	GPUDriver   string `json:"gpu_driver,omitempty"`
	CUDAVersion string `json:"cuda_version,omitempty"`
	// GPUMemoryMode is how the node holds jobs to their VRAM shares
	// (issue 24): GPUMemoryDmem, GPUMemoryWatchReport or
	// GPUMemoryWatchKill; "" on a node without GPUs.
	GPUMemoryMode string `json:"gpu_memory_mode,omitempty"`
	// GPUReset is the last operator health reset of its GPUs (gpu_reset.go).
	GPUReset *GPUReset `json:"gpu_reset,omitempty"`

	Gossip        GossipState `json:"gossip"`
	Eligibility   Eligibility `json:"eligibility"`
	DrainDeadline time.Time   `json:"drain_deadline,omitzero"`

	// StateChangedAt is the leader's stamp of the last Gossip change.
	StateChangedAt time.Time `json:"state_changed_at"`
	ModifyIndex    uint64    `json:"modify_index"`
}

// AllowsJobUser reports whether a job with user spec (name or uid,
// optionally ":group") may be placed on n. A job naming no user runs as
// the node's default user, which the node allows by construction.
func (n *Node) AllowsJobUser(spec string) bool {
	name, _, _ := strings.Cut(spec, ":")
	if name == "" || n.JobUsers == nil {
		return true
	}
	for _, u := range n.JobUsers {
		if u == "*" || u == name {
			return true
		}
	}
	return false
}

// ValidNodeName checks a node name as servers accept it from a client:
// 1-128 bytes, no '/' or NUL.
func ValidNodeName(name string) error {
	if name == "" || len(name) > 128 || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%q is not a node name (1-128 bytes, no '/')", name)
	}
	return nil
}
