package cluster

import "errors"

var (
	// ErrNotLeader means the call needs the leader and this node is not it.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader means no leader is known (election in progress or no
	// quorum); the write was not sent anywhere and may be retried.
	ErrNoLeader = errors.New("no leader")
	// ErrIndeterminate means a write was handed to raft (or to the leader)
	// but its outcome is unknown: leadership was lost, raft shut down, or the
	// forwarded request failed after it was sent. It may have committed; a
	// client retries with the same idempotency key.
	ErrIndeterminate = errors.New("write outcome unknown: it may have been committed")
	// ErrClusterMismatch means a join crossed two different clusters.
	ErrClusterMismatch = errors.New("cluster ID mismatch")
	// ErrJoin means none of the join addresses could be reached.
	ErrJoin = errors.New("join failed")
	// ErrNotReady means the node cannot yet serve up-to-date reads.
	ErrNotReady = errors.New("not ready")
	// ErrShutdown means the node has been shut down.
	ErrShutdown = errors.New("cluster node shut down")
	// ErrMetaTooLarge means the node's self-description does not fit in the
	// gossip meta (512 bytes); trim labels or drivers.
	ErrMetaTooLarge = errors.New("node description too large for gossip")
	// ErrNotEmpty means a restore was refused because the state holds jobs
	// that it would replace (RestoreOptions.Force overrides).
	ErrNotEmpty = errors.New("restore refused")
	// ErrNothingToSave means a snapshot was asked for before the cluster
	// applied anything.
	ErrNothingToSave = errors.New("nothing to snapshot")
	// ErrRefused means a raft operator request was refused because it
	// would lose quorum or its target cannot take the role; the message
	// says why.
	ErrRefused = errors.New("refused")
	// ErrUnknownServer means a raft operator request named a server that
	// is not in the raft configuration.
	ErrUnknownServer = errors.New("no such raft server")
)
