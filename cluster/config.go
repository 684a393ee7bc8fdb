package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"

	sockaddr "github.com/hashicorp/go-sockaddr"

	"github.com/foreman-sched/foreman/certs"
	"github.com/foreman-sched/foreman/fsm"
)

// DefaultPort is the base port: HTTP on it, raft on +1, gossip on +2.
const DefaultPort = 7070

// Config configures one cluster node. Map CLI flags onto it in one place
// (main) and call Validate before New.
type Config struct {
	// DataDir holds raft.db, fsm.db, snapshots/ and cluster.json.
	DataDir string
	// Name is this node's unique name in the cluster (default: hostname).
	Name string
	// BindAddr is the IP the raft and gossip listeners bind to. Empty means
	// 127.0.0.1 with Dev and 0.0.0.0 otherwise.
	BindAddr string
	// AdvertiseAddr is the IP peers use to reach this node. Empty means
	// BindAddr, or the first private IPv4 address when BindAddr is 0.0.0.0.
	AdvertiseAddr string
	// Port is the base port: HTTP = Port, raft = Port+1, gossip = Port+2.
	Port int
	// Join lists peers to join: "HOST" (default port) or "HOST:BASE". The
	// gossip port BASE+2 is dialled.
	Join []string
	// BootstrapExpect makes the node wait for this many fresh servers in
	// gossip and then bootstrap raft with all of them. Zero with no Join and
	// no Dev means 1 (a lone node forms its own cluster).
	BootstrapExpect int
	// Voters is the target number of raft voters (1, 3 or 5). Later servers
	// join as non-voters and are promoted when a voter dies.
	Voters int
	// Dev runs a single node that bootstraps at once.
	Dev bool
	// Replica makes this server a raft non-voter that is never promoted:
	// it applies the log and serves reads, the API, the UI and client
	// streams, but never votes (so never slows a commit). It takes no part
	// in the bootstrap.
	Replica bool
	// AdvertiseFeatures, when set, replaces the features this node gossips
	// (fsm.KnownFeatures): tests simulate a server of an older build with
	// it. The agent never sets it.
	AdvertiseFeatures *fsm.FeatureSet
	// DeadServerTimeout is how long a voter must be dead to gossip before the
	// leader replaces it with a healthy non-voter (and how long a dead
	// non-voter stays in the raft configuration).
	DeadServerTimeout time.Duration
	// LeaderContactTimeout bounds how old the last contact with the leader
	// may be for InContactWithLeader and Ready to say yes.
	LeaderContactTimeout time.Duration
	// ReconcileInterval is the leader's safety tick for membership
	// reconciliation; gossip events trigger it sooner.
	ReconcileInterval time.Duration
	// ForwardTimeout bounds how long Apply waits for a leader and retries a
	// forward across leader changes (the caller's ctx may cut it shorter).
	ForwardTimeout time.Duration
	// Slots is the bound on live attempts (each one a supervisor) this
	// node advertises (fsm.Node.Slots) when its self-description names
	// none: the leader places no more there, so the excess waits queued in
	// the replicated state. Default 16×NumCPU: above what fits by sched's
	// default request (100m each), so it binds only jobs with tiny
	// requests; an idle supervisor costs ~2.3 MiB of private memory.
	// 0 = unbounded.
	Slots int
	// SyncGossipInterval is how often the node gossips its applied index
	// and in-sync flag when they changed (NodesBehind reads them).
	SyncGossipInterval time.Duration
	// Raft and Gossip hold the protocol timings (see DESIGN.md).
	Raft   RaftTimings
	Gossip GossipTimings
	// NoSync skips fsync in the raft log and state file (tests only).
	NoSync bool
	// Network, when set, decides which peers are reachable (tests use it to
	// partition nodes in-process). Nil means every peer is reachable.
	Network Network
	// InternalAuth, when set, adds this node's credential to every request
	// it makes to another node's /v1/internal/ endpoints (ACL's
	// cluster-internal secret, docs/security.md). Nil adds nothing.
	InternalAuth func(http.Header)
	// Work, when set, builds the payload of the work streams this node
	// serves to nodes outside raft (workstream.go); nil answers 501.
	Work WorkSource
	// WorkStreams bounds the work streams and their pings (workstream.go);
	// a zero field takes its default.
	WorkStreams WorkStreamLimits
	// Clients sets how the servers hear the clients attached to them and
	// when the leader declares a silent one dead (clientlive.go); a zero
	// field takes its default.
	Clients ClientLimits
	// Spread sets how the servers even out their clients
	// (clientspread.go); a zero field takes its default.
	Spread SpreadLimits
	// RaftLogLevel is hclog's level for raft's own log lines (default warn).
	RaftLogLevel string
	// TLS, when set, puts raft and this node's calls to other nodes'
	// internal HTTP endpoints under mutual TLS with agent certificates
	// (certs.ServerName), and InternalHandler refuses callers without one.
	// The caller must then serve the HTTP port with TLS too. Nil: plain TCP.
	TLS *certs.Store
	// GossipKeys, when set, encrypts and authenticates gossip (memberlist's
	// AES-GCM keyring): the first key encrypts, all of them decrypt, so a
	// key can be rotated in. Each is 16, 24 or 32 bytes. Empty: clear text.
	GossipKeys [][]byte
}

// RaftTimings are hashicorp/raft's knobs that matter for failure detection
// and throughput.
type RaftTimings struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	MaxAppendEntries   int
	SnapshotInterval   time.Duration
	SnapshotThreshold  uint64
	TrailingLogs       uint64
	// SnapshotLogBytes bounds the log by size as well as by count: once
	// the entries stored since the last snapshot add up to this many bytes
	// (or to the last snapshot's size, if larger, so a big state is not
	// rewritten too often), the node snapshots and keeps only about this
	// many bytes of trailing log. 0 leaves only the count-based triggers.
	SnapshotLogBytes uint64
}

// GossipTimings are memberlist's failure-detector knobs.
type GossipTimings struct {
	ProbeInterval           time.Duration
	ProbeTimeout            time.Duration
	SuspicionMult           int
	SuspicionMaxTimeoutMult int
	GossipInterval          time.Duration
	PushPullInterval        time.Duration
	TCPTimeout              time.Duration
	// GossipToTheDeadTime is how long dead nodes keep being gossiped to
	// (and stay visible as dead) before memberlist forgets them.
	GossipToTheDeadTime time.Duration
}

// DefaultConfig returns production defaults; DESIGN.md explains the timings.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Name:                 host,
		Port:                 DefaultPort,
		Voters:               3,
		DeadServerTimeout:    30 * time.Second,
		LeaderContactTimeout: 2 * time.Second,
		ReconcileInterval:    5 * time.Second,
		ForwardTimeout:       10 * time.Second,
		SyncGossipInterval:   time.Second,
		Slots:                16 * runtime.NumCPU(),
		Raft: RaftTimings{
			// Chosen for loaded machines (DESIGN.md, "Timings"): a leader
			// whose heartbeats run late under a job storm keeps office,
			// a dead one is replaced in 2–4 s.
			HeartbeatTimeout:   2000 * time.Millisecond,
			ElectionTimeout:    2000 * time.Millisecond,
			LeaderLeaseTimeout: 1000 * time.Millisecond,
			CommitTimeout:      500 * time.Millisecond, // commitpush.go: only the idle cost
			MaxAppendEntries:   512,
			SnapshotInterval:   30 * time.Second,
			SnapshotThreshold:  8192,
			TrailingLogs:       10240,
			SnapshotLogBytes:   64 << 20,
		},
		Gossip: GossipTimings{
			ProbeInterval:           1 * time.Second,
			ProbeTimeout:            500 * time.Millisecond,
			SuspicionMult:           4,
			SuspicionMaxTimeoutMult: 2,
			GossipInterval:          200 * time.Millisecond,
			PushPullInterval:        15 * time.Second,
			TCPTimeout:              5 * time.Second,
			GossipToTheDeadTime:     30 * time.Second,
		},
		RaftLogLevel: "warn",
	}
}

// Validate reports the first invalid field by name.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("cluster: DataDir must be set")
	}
	if c.Name == "" {
		return errors.New("cluster: Name must be set (the hostname was not available)")
	}
	if len(c.Name) > 128 {
		return errors.New("cluster: Name must be at most 128 bytes")
	}
	if c.BindAddr != "" && net.ParseIP(c.BindAddr) == nil {
		return fmt.Errorf("cluster: BindAddr %q must be an IP address", c.BindAddr)
	}
	if c.AdvertiseAddr != "" {
		ip := net.ParseIP(c.AdvertiseAddr)
		if ip == nil {
			return fmt.Errorf("cluster: AdvertiseAddr %q must be an IP address", c.AdvertiseAddr)
		}
		if ip.IsUnspecified() {
			return fmt.Errorf("cluster: AdvertiseAddr %q must not be the unspecified address", c.AdvertiseAddr)
		}
	}
	if c.Port < 1 || c.Port > 65533 {
		return fmt.Errorf("cluster: Port %d must be in 1..65533 (it uses Port, Port+1 and Port+2)", c.Port)
	}
	for _, j := range c.Join {
		if _, err := joinAddr(j); err != nil {
			return fmt.Errorf("cluster: Join %q: %w", j, err)
		}
	}
	if c.BootstrapExpect < 0 {
		return errors.New("cluster: BootstrapExpect must not be negative")
	}
	if c.Dev && c.BootstrapExpect > 1 {
		return errors.New("cluster: BootstrapExpect must be 0 or 1 with Dev")
	}
	switch c.Voters {
	case 1, 3, 5:
	default:
		return fmt.Errorf("cluster: Voters %d must be 1, 3 or 5", c.Voters)
	}
	if c.DeadServerTimeout <= 0 {
		return errors.New("cluster: DeadServerTimeout must be positive")
	}
	if c.Slots < 0 {
		return errors.New("cluster: Slots must be >= 0 (0: unbounded)")
	}
	if c.SyncGossipInterval <= 0 {
		return errors.New("cluster: SyncGossipInterval must be positive")
	}
	if c.LeaderContactTimeout <= 0 {
		return errors.New("cluster: LeaderContactTimeout must be positive")
	}
	if c.ReconcileInterval <= 0 {
		return errors.New("cluster: ReconcileInterval must be positive")
	}
	if c.ForwardTimeout <= 0 {
		return errors.New("cluster: ForwardTimeout must be positive")
	}
	for i, k := range c.GossipKeys {
		if l := len(k); l != 16 && l != 24 && l != 32 {
			return fmt.Errorf("cluster: GossipKeys[%d] is %d bytes; want 16, 24 or 32", i, l)
		}
	}
	r := c.Raft
	if r.HeartbeatTimeout < 5*time.Millisecond || r.ElectionTimeout < r.HeartbeatTimeout {
		return errors.New("cluster: Raft.HeartbeatTimeout must be >= 5ms and Raft.ElectionTimeout >= Raft.HeartbeatTimeout")
	}
	if r.LeaderLeaseTimeout <= 0 || r.LeaderLeaseTimeout > r.HeartbeatTimeout {
		return errors.New("cluster: Raft.LeaderLeaseTimeout must be positive and at most Raft.HeartbeatTimeout")
	}
	if r.CommitTimeout <= 0 {
		return errors.New("cluster: Raft.CommitTimeout must be positive")
	}
	if r.MaxAppendEntries < 1 || r.MaxAppendEntries > 1024 {
		return errors.New("cluster: Raft.MaxAppendEntries must be in 1..1024")
	}
	if r.SnapshotInterval < 5*time.Millisecond || r.SnapshotThreshold == 0 {
		return errors.New("cluster: Raft.SnapshotInterval must be >= 5ms and Raft.SnapshotThreshold positive")
	}
	g := c.Gossip
	if g.ProbeInterval <= 0 || g.ProbeTimeout <= 0 || g.ProbeTimeout > g.ProbeInterval {
		return errors.New("cluster: Gossip.ProbeTimeout must be positive and at most Gossip.ProbeInterval")
	}
	if g.SuspicionMult < 1 || g.SuspicionMaxTimeoutMult < 1 {
		return errors.New("cluster: Gossip.SuspicionMult and Gossip.SuspicionMaxTimeoutMult must be >= 1")
	}
	if g.GossipInterval <= 0 || g.PushPullInterval <= 0 || g.TCPTimeout <= 0 || g.GossipToTheDeadTime <= 0 {
		return errors.New("cluster: Gossip.GossipInterval, PushPullInterval, TCPTimeout and GossipToTheDeadTime must be positive")
	}
	if sp := c.Spread; sp.Interval < 0 || sp.MovesPerRound < 0 || sp.Tolerance < 0 {
		return errors.New("cluster: Spread.Interval, MovesPerRound and Tolerance must not be negative (0 takes the default)")
	}
	if w := c.WorkStreams; w.PingInterval < 0 || w.NewPerSecond < 0 || w.BusyPerSecond < 0 || w.CatchUp < 0 {
		return errors.New("cluster: WorkStreams.PingInterval, NewPerSecond, BusyPerSecond and CatchUp must not be negative (0 takes the default)")
	}
	return nil
}

// bindIP is the address listeners bind to.
func (c *Config) bindIP() string {
	switch {
	case c.BindAddr != "":
		return c.BindAddr
	case c.Dev:
		return "127.0.0.1"
	default:
		return "0.0.0.0"
	}
}

// advertiseIP is the address peers dial.
func (c *Config) advertiseIP() (string, error) {
	if c.AdvertiseAddr != "" {
		return c.AdvertiseAddr, nil
	}
	bind := c.bindIP()
	if ip := net.ParseIP(bind); !ip.IsUnspecified() {
		return bind, nil
	}
	ip, err := sockaddr.GetPrivateIP()
	if err != nil || ip == "" {
		return "", fmt.Errorf("cluster: AdvertiseAddr must be set: BindAddr is %s and no private IPv4 address was found", bind)
	}
	return ip, nil
}

func (c *Config) bootstrapExpect() int {
	switch {
	case c.Dev:
		return 1
	case c.BootstrapExpect > 0:
		return c.BootstrapExpect
	case len(c.Join) == 0:
		return 1
	default:
		return 0 // join an existing cluster; never bootstrap
	}
}

// joinAddr turns "HOST" or "HOST:BASE" into the peer's gossip address.
func joinAddr(s string) (string, error) {
	host, port := s, DefaultPort
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65533 {
			return "", fmt.Errorf("port %q must be a number in 1..65533", p)
		}
		host, port = h, n
	}
	if host == "" {
		return "", errors.New("host must not be empty")
	}
	return net.JoinHostPort(host, strconv.Itoa(port+2)), nil
}

// RaftAddTimeout bounds one raft configuration change made by reconcile.
func (c *Config) RaftAddTimeout() time.Duration { return c.ForwardTimeout }
