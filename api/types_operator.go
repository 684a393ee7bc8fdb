package api

import "time"

// StateCounts counts what a state holds (a snapshot's, or what a restore
// replaced).
type StateCounts struct {
	Jobs            int            `json:"jobs"`
	JobsByState     map[string]int `json:"jobs_by_state,omitempty"`
	Attempts        int            `json:"attempts"`
	LiveAttempts    int            `json:"live_attempts"`
	Nodes           int            `json:"nodes"`
	NodeNames       []string       `json:"node_names,omitempty"`
	Queues          int            `json:"queues"`
	IdempotencyKeys int            `json:"idempotency_keys"`
}

// Unfinished is the number of jobs not in a terminal state.
func (c StateCounts) Unfinished() int {
	n := 0
	for s, k := range c.JobsByState {
		if !JobState(s).Terminal() {
			n += k
		}
	}
	return n
}

// BackupHeader describes a snapshot file (a backup of the whole state).
type BackupHeader struct {
	Format        int         `json:"format"`
	SchemaVersion int         `json:"schema_version"`
	Index         uint64      `json:"index"` // raft index of the snapshot
	Term          uint64      `json:"term"`
	Size          int64       `json:"size"` // bytes of the state image
	ClusterID     string      `json:"cluster_id,omitempty"`
	Node          string      `json:"node,omitempty"` // the leader that took it
	CreatedAt     time.Time   `json:"created_at"`
	Counts        StateCounts `json:"counts"`
}

// RestoreResponse is the answer to RestoreSnapshot.
type RestoreResponse struct {
	Snapshot BackupHeader `json:"snapshot"`
	Index    uint64       `json:"index"`    // the raft index the state was installed at
	Replaced StateCounts  `json:"replaced"` // what the state held before (only with force)
	// DeadNodes are the snapshot's nodes that are not members of this
	// cluster: restored as dead, their attempts re-queued.
	DeadNodes []string `json:"dead_nodes,omitempty"`
}

// TransferResponse names the leader after TransferLeadership.
type TransferResponse struct {
	Leader string `json:"leader"`
}

// RemovePeerResponse names the server RemovePeer removed.
type RemovePeerResponse struct {
	Removed string `json:"removed"`
}

// GossipKey is one installed gossip key, by fingerprint (never the key).
type GossipKey struct {
	Fingerprint string `json:"fingerprint"`
	Primary     bool   `json:"primary,omitempty"`
}

// NodeGossipKeys is one node's gossip keys, or why it did not answer.
type NodeGossipKeys struct {
	Node  string      `json:"node"`
	Keys  []GossipKey `json:"keys,omitempty"`
	Error string      `json:"error,omitempty"`
}

// GossipKeysResponse is every alive node's keys after an operation (op
// "list" for GossipKeys); OK is false when a node failed it.
type GossipKeysResponse struct {
	Op    string           `json:"op"`
	OK    bool             `json:"ok"`
	Nodes []NodeGossipKeys `json:"nodes"`
}

// InternalRotateResponse is the answer to RotateInternalSecret.
type InternalRotateResponse struct {
	Rotated bool   `json:"rotated"`
	Index   uint64 `json:"index"` // the raft index of the rotation
}

// CheckpointInfo is the answer to PutCheckpoint.
type CheckpointInfo struct {
	JobID string `json:"job_id"`
	Bytes int    `json:"bytes"`
}
