package httpapi

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// Cluster is this node's view of the raft group. main adapts cluster.Node
// to it. Methods are called from request goroutines, concurrently.
type Cluster interface {
	// Apply commits cmd through raft and returns the FSM's result once it
	// is applied on this node. On a node without a known leader it returns
	// an error wrapping ErrNoLeader. A refused command comes back as a
	// Result with Err set (wrapping an fsm sentinel), not as the error.
	Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error)
	// IsLeader reports whether this node is the raft leader right now.
	IsLeader() bool
	// Leader returns the leader's node name and HTTP address (host:port),
	// or empty strings when none is known.
	Leader() (name, httpAddr string)
	// ConsistentRead returns once this node is verified leader and has
	// applied everything committed before the call (leader only).
	ConsistentRead(ctx context.Context) error
	// NodeName is this node's name (the fsm.Node.Name of the local agent).
	NodeName() string
	// Members lists the gossip members with their raft roles.
	Members() []Member
	// RaftInfo describes this node's raft state.
	RaftInfo() RaftInfo
	// Ready returns nil once a leader is known and this node has caught up,
	// else an error saying why not.
	Ready() error
	// Join asks this node to join the cluster that the addresses belong to.
	Join(addrs []string) error
	// Leave makes this node leave the cluster (raft and gossip) gracefully.
	Leave(ctx context.Context) error
	// FeatureGate is what every server of the raft configuration
	// advertises it can apply, as this node's gossip sees it. Apply
	// refuses a command needing more (fsm.ErrFeatureHeld); the group
	// commit checks each submit against it before merging them.
	FeatureGate() fsm.FeatureGate
}

// State is the local replicated state machine; *fsm.FSM satisfies it.
type State interface {
	// View runs fn in a consistent read transaction.
	View(fn func(tx *fsm.Tx) error) error
	// AppliedIndex is the raft index of the last applied entry.
	AppliedIndex() uint64
	// StateHash hashes the whole state at the index it returns.
	StateHash() (index uint64, hash string, err error)
	// Watch returns a channel signalled after every applied batch, and a
	// function that stops it.
	Watch() (<-chan struct{}, func())
}

// Logs streams an attempt's log from this node's executor (exec.Worker
// satisfies it). stream is "stdout" or "stderr". With follow it returns
// when the attempt has finished and the log is drained, or ctx ends. An
// attempt unknown here gives an error wrapping fs.ErrNotExist.
type Logs interface {
	StreamLog(ctx context.Context, jobID string, attempt int, stream string, follow bool, out io.Writer) error
}

// Artifacts opens an artifact of an attempt that ran on this node (main
// adapts exec.Worker). path is a clean relative path (fsm.ValidArtifactPath).
// An artifact that is not here gives an error wrapping fs.ErrNotExist.
// Called from request goroutines, concurrently.
type Artifacts interface {
	OpenArtifact(jobID string, attempt int, path string) (*os.File, error)
}

// Usage measures what this node's jobs use now (main adapts
// exec.NodeUsage): CPU seconds used so far and memory bytes, each with
// whether it could be measured (a node without a jobs cgroup cannot).
type Usage interface {
	NodeUsage(node string) (cpuSeconds, memBytes float64, cpuOK, memOK bool)
}

// GPUUsage measures what job's processes use on this node's devices
// uuids (exec.JobGPUUsage): one entry per UUID, values nil where nvidia-smi
// could not say, note saying why.
type GPUUsage interface {
	JobGPUUsage(job string, uuids []string) (devs []GPUDeviceUse, at time.Time, note string, err error)
}

// Shares computes the fair-share view from a read transaction of the
// replicated state (main adapts sched.NamespaceShares). Called from
// request goroutines, concurrently.
type Shares interface {
	NamespaceShares(tx *fsm.Tx, now time.Time) (*api.NamespaceShares, error)
}

// Clock supplies "now" for the commands the leader stamps.
type Clock interface{ Now() time.Time }

// IDs mints job IDs. Implementations must be safe for concurrent use and
// return IDs that sort by creation time (ULIDs); see NewULIDs.
type IDs interface{ NewID() string }

// Deps are what the handler needs from the rest of the agent. Cluster and
// State are required; the rest default (Logs: log requests for attempts on
// this node fail with 503; Operator: operator requests fail with 503;
// Clock: the system clock; IDs: NewULIDs; Logger: slog.Default()).
type Deps struct {
	Cluster Cluster
	State   State
	Logs    Logs
	// Exec runs commands in this node's live attempts (nil: an exec of
	// an attempt here answers 503).
	Exec     Exec
	Operator Operator
	Clock    Clock
	IDs      IDs
	Logger   *slog.Logger
	// Artifacts serves this node's artifacts (nil: requests for artifacts
	// kept here fail with 503).
	Artifacts Artifacts
	// Objects reads outputs from the object store (nil: this agent has
	// none; outputs whose node is gone answer 502 as before).
	Objects Objects
	// GossipKeys rotates the gossip key cluster-wide (nil: those
	// requests fail with 503).
	GossipKeys GossipKeyring
	// Usage measures this node's jobs (nil: GET /v1/nodes/{name}/usage
	// answers with nothing measured).
	Usage Usage
	// GPUUsage measures this node's jobs on their GPUs (nil: GET
	// /v1/jobs/{id}/gpu-usage of an attempt here answers 503).
	GPUUsage GPUUsage
	// Shares computes GET /v1/namespaces/shares (nil: it answers 503).
	Shares Shares
	// ACL guards the routes; nil: one from Config.ACL. The agent passes
	// the one its own routes (UI, pprof, internal) share.
	ACL *ACL
	// PeerTLS, when set, is the TLS config this node dials other nodes'
	// APIs with (proxied reads and log follows, grouped submits to the
	// leader): the agent's own certificate, verifying theirs. Nil: plain
	// http between nodes.
	PeerTLS *tls.Config
}

// Member is one gossip member as the API reports it.
type Member = api.Member

// RaftInfo is one node's raft state as the API reports it.
type RaftInfo = api.RaftInfo

// RaftServer is one entry of the raft configuration.
type RaftServer = api.RaftServer

// Objects reads attempts' outputs from the cluster's object store (issue
// 25) when their node cannot serve them. Open is called from request
// goroutines and may block for the transfer's start; ErrNoSuchObject-like
// errors come back wrapped as the store words them.
type Objects interface {
	Location() string
	Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
}
