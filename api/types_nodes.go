package api

import "time"

// Node is a node as listed: its description, liveness and allocation.
type Node struct {
	Name           string            `json:"name"`
	HTTPAddr       string            `json:"http_addr"`
	RaftAddr       string            `json:"raft_addr"`
	GossipAddr     string            `json:"gossip_addr"`
	Capacity       Resources         `json:"capacity"`
	Labels         map[string]string `json:"labels,omitempty"`
	Drivers        []string          `json:"drivers,omitempty"`
	Version        string            `json:"version,omitempty"`
	Slots          int               `json:"slots,omitempty"`
	JobUsers       []string          `json:"job_users,omitempty"`
	Volumes        []HostVolume      `json:"volumes,omitempty"`         // the host directories it lends to jobs by name
	Role           string            `json:"role,omitempty"`            // replica or client; "" for a server
	GPUs           []GPU             `json:"gpus,omitempty"`            // detected NVIDIA GPUs, by index
	GPUDriver      string            `json:"gpu_driver,omitempty"`      // NVIDIA driver version
	CUDAVersion    string            `json:"cuda_version,omitempty"`    // highest CUDA the driver supports
	GPUMemoryMode  string            `json:"gpu_memory_mode,omitempty"` // dmem, watchdog-report or watchdog-kill
	GPUReset       *GPUReset         `json:"gpu_reset,omitempty"`       // the last operator health reset
	Gossip         string            `json:"gossip"`                    // alive, suspect, dead, left
	Eligibility    string            `json:"eligibility"`               // eligible, draining, ineligible
	DrainDeadline  time.Time         `json:"drain_deadline,omitzero"`
	StateChangedAt time.Time         `json:"state_changed_at"`
	ModifyIndex    uint64            `json:"modify_index"`
	Allocated      Resources         `json:"allocated"`
	Running        int               `json:"running"` // live attempts
	// SilentSince is set while the node is shown "silent": a client the
	// leader has not heard from since then, whose death it holds.
	SilentSince *time.Time `json:"silent_since,omitempty"`
}

// HostVolume is a directory a node lends to jobs under a name
// (foreman agent --host-volume).
type HostVolume struct {
	Name     string `json:"name"`
	Path     string `json:"path"` // absolute, on the node
	ReadOnly bool   `json:"read_only,omitempty"`
}

// GPUReset is the last operator health reset of a node's GPUs
// (Client.ResetNodeGPUs); the node's agent acts on it once.
type GPUReset struct {
	Index uint64    `json:"index"` // the raft index that recorded it
	UUIDs []string  `json:"uuids"`
	By    string    `json:"by,omitempty"` // "token NAME"; with ACL off "a request from ADDRESS"
	At    time.Time `json:"at"`
}

// GPUResetResponse says which devices a reset named (none when the node
// had no unhealthy device).
type GPUResetResponse struct {
	Node  string   `json:"node"`
	UUIDs []string `json:"uuids"`
	Index uint64   `json:"index,omitempty"`
	By    string   `json:"by,omitempty"`
}

// NodeDetail is a node with its live attempts.
type NodeDetail struct {
	Node
	Attempts []Attempt `json:"attempts"`
}

// NodeSummary counts every node the query could see, by role and by
// gossip state.
type NodeSummary struct {
	Total   int            `json:"total"`
	ByRole  map[string]int `json:"by_role"`  // server, replica, client
	ByState map[string]int `json:"by_state"` // alive, suspect, dead, left
}

// NodeList is one page of nodes and the summary of them all.
type NodeList struct {
	Nodes      []Node      `json:"nodes"`
	Summary    NodeSummary `json:"summary"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// NodeQuery filters ListNodes; zero fields do not filter.
type NodeQuery struct {
	Role   string // server, replica, client
	State  string // alive, suspect, dead, left
	Name   string // prefix
	Limit  int
	Cursor string
}

// HashResponse is a node's state hash at an index (compare nodes with it).
type HashResponse struct {
	Node  string `json:"node"`
	Index uint64 `json:"index"`
	Hash  string `json:"hash"`
}
