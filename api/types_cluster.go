package api

import "time"

// NamespaceSpec is a namespace's quota and policy, as set. Zero limits
// are unlimited.
type NamespaceSpec struct {
	MaxRunning *int     `json:"max_running,omitempty"` // live attempts
	MaxCPU     int64    `json:"max_cpu,omitempty"`     // millicores, summed over live attempts
	MaxMemory  int64    `json:"max_memory,omitempty"`  // MiB, summed over live attempts
	Drivers    []string `json:"drivers,omitempty"`     // the drivers its jobs may use; empty: any
	AllowRoot  bool     `json:"allow_root,omitempty"`  // its jobs may run as root
	Volumes    []string `json:"volumes,omitempty"`     // the host volumes its jobs may mount; empty: any
	Share      int64    `json:"share,omitempty"`       // fair share, 1..1000000; absent: none (counts as 1 while another namespace sets one)
}

// NamespaceUsage is what a namespace's jobs hold now.
type NamespaceUsage struct {
	Running int              `json:"running"`
	CPU     int64            `json:"cpu"`
	Memory  int64            `json:"memory"`
	Jobs    map[JobState]int `json:"jobs"`
}

// NamespaceStatus is a namespace's quota, policy and usage.
type NamespaceStatus struct {
	Name       string         `json:"name"`
	Configured bool           `json:"configured"` // it has a record (else: defaults, active jobs only)
	MaxRunning int            `json:"max_running"`
	MaxCPU     int64          `json:"max_cpu"`
	MaxMemory  int64          `json:"max_memory"`
	Drivers    []string       `json:"drivers,omitempty"`
	AllowRoot  bool           `json:"allow_root"`
	Volumes    []string       `json:"volumes,omitempty"`
	Share      int64          `json:"share,omitempty"` // fair share; 0: not set
	Usage      NamespaceUsage `json:"usage"`
}

// Allocation is an allocation rate: cpu in millicores, memory in MiB,
// whole GPUs.
type Allocation struct {
	CPU    float64 `json:"cpu"`
	Memory float64 `json:"memory"`
	GPUs   float64 `json:"gpus"`
}

// NamespaceShare is one namespace's fair-share standing.
type NamespaceShare struct {
	Name       string  `json:"name"`
	Share      int64   `json:"share"`      // as set; 0: not set (counts as 1 while fair share is on)
	Normalized float64 `json:"normalized"` // share / the sum of the listed namespaces' shares
	// Recent is its recent average allocation (finished attempts, decayed
	// with the half-life); Live what its live attempts hold now. The
	// *_dominant figures are their largest fraction of the cluster's
	// capacity over cpu, memory and GPUs.
	Recent         Allocation `json:"recent"`
	RecentDominant float64    `json:"recent_dominant"`
	Live           Allocation `json:"live"`
	LiveDominant   float64    `json:"live_dominant"`
	// Factor is its fair-share key: (recent + live) dominant share /
	// share. Among jobs of equal priority the lowest goes first.
	Factor float64 `json:"factor"`
}

// NamespaceShares is the reply to GET /v1/namespaces/shares.
type NamespaceShares struct {
	Enabled         bool             `json:"enabled"` // some namespace sets a share
	HalfLifeSeconds float64          `json:"half_life_seconds"`
	Capacity        Allocation       `json:"capacity"`
	Namespaces      []NamespaceShare `json:"namespaces"`
}

// NodeUsage is what a node's jobs use now, measured by that node.
type NodeUsage struct {
	Node            string    `json:"node"`
	CPUSecondsTotal *float64  `json:"cpu_seconds_total,omitempty"`
	MemoryBytes     *int64    `json:"memory_bytes,omitempty"`
	At              time.Time `json:"at"`
}

// Member is a gossip member as one agent sees it.
type Member struct {
	Name     string `json:"name"`
	Addr     string `json:"addr"`
	HTTPAddr string `json:"http_addr"`
	RaftAddr string `json:"raft_addr"`
	Status   string `json:"status"`
	RaftRole string `json:"raft_role"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
	Version  string `json:"version,omitempty"`
}

// RaftServer is one server of the raft configuration.
type RaftServer struct {
	ID           string `json:"id"`
	Address      string `json:"address"`
	Suffrage     string `json:"suffrage"`
	Role         string `json:"role"`
	LastHeardAgo string `json:"last_heard_ago,omitempty"`
	Clients      *int   `json:"clients,omitempty"`
	// Version is the foreman version it gossips ("": unknown).
	Version string `json:"version,omitempty"`
	// Features are the features beyond the baseline it can apply, of
	// those the answering agent knows (none: an older build, or a server
	// not heard in gossip).
	Features []string `json:"features,omitempty"`
}

// ClusterFeatures is the feature gate as the answering agent sees it: a
// write needing a feature that some server of the raft configuration does
// not advertise is refused (409, code feature_held) until every server has
// been upgraded. Features are those the answering agent knows.
type ClusterFeatures struct {
	// Enabled are the features every server can apply.
	Enabled []string `json:"enabled"`
	// Held are the features some server lacks, with those servers.
	Held []HeldFeature `json:"held,omitempty"`
}

// HeldFeature is a feature held back, and the servers lacking it.
type HeldFeature struct {
	Name    string   `json:"name"`
	Lacking []string `json:"lacking"`
}

// RaftInfo is an agent's raft state.
type RaftInfo struct {
	Node          string            `json:"node"`
	State         string            `json:"state"`
	Leader        string            `json:"leader"`
	LeaderAddr    string            `json:"leader_addr,omitempty"`
	Term          uint64            `json:"term"`
	CommitIndex   uint64            `json:"commit_index"`
	AppliedIndex  uint64            `json:"applied_index"`
	LastIndex     uint64            `json:"last_index"`
	FirstIndex    uint64            `json:"first_index"`
	SnapshotIndex uint64            `json:"snapshot_index"`
	LastContact   string            `json:"last_contact,omitempty"`
	Voters        int               `json:"voters"`
	Servers       []RaftServer      `json:"servers,omitempty"`
	Stats         map[string]string `json:"stats,omitempty"`
	// Features is the feature gate (nil: an agent from before it).
	Features *ClusterFeatures `json:"features,omitempty"`
}

// ACLRole grants a role (read, submit, write, operator, management) in a
// namespace ("": every namespace).
type ACLRole struct {
	Role      string `json:"role"`
	Namespace string `json:"namespace,omitempty"` // read, submit, write: a namespace or "*"
	Node      string `json:"node,omitempty"`      // client: the client agent it speaks for, or "*"
}

// String is the role as the CLI takes it: ROLE, ROLE:NAMESPACE or
// client:NODE.
func (r ACLRole) String() string {
	s := r.Role
	if r.Namespace != "" {
		s += ":" + r.Namespace
	}
	if r.Node != "" {
		s += ":" + r.Node
	}
	return s
}

// TokenSpec asks for a token.
type TokenSpec struct {
	Name      string     `json:"name,omitempty"`
	Roles     []ACLRole  `json:"roles"`
	TTL       Duration   `json:"ttl,omitempty"` // 0: never expires (unless ExpiresAt)
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Token is a token as listed: never its secret.
type Token struct {
	AccessorID string    `json:"accessor_id"`
	Name       string    `json:"name,omitempty"`
	Roles      []ACLRole `json:"roles"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	Expired    bool      `json:"expired,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// NewToken is a token just made, with its secret: the only time the
// server shows it.
type NewToken struct {
	Token
	Secret string `json:"secret"`
}
