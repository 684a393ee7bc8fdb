package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/fsm"
)

// Node is one agent's membership in the cluster: its raft server, its gossip
// member and the leader-side loops. Methods are safe for concurrent use.
type Node struct {
	cfg    Config
	logger *slog.Logger
	fsm    *fsm.FSM
	self   fsm.Node // this node's self-description with its addresses
	// selfMu guards self's GPUs and capacity, which SetGPUs changes
	// (gpus.go); the addresses never change.
	selfMu  sync.Mutex
	storage *raftStorage
	trans   *raftTransport
	raft    *raft.Raft
	heard   *heardTracker
	ml      *memberlist.Memberlist
	keyring *memberlist.Keyring // nil: gossip in clear (keyring.go)
	members *memberTable
	state   *stateStore
	meta    atomic.Pointer[[]byte]
	client  *http.Client

	// The work streams this node serves to nodes outside raft.
	workWaker         *workWaker
	workAdmission     admission
	workAdmissionBusy admission     // streams of clients holding attempts (workstream.go)
	attached          *clientTable  // the clients whose streams this server holds
	workStop          chan struct{} // closed by StopWorkStreams
	workConns         workConns     // the open streams (workconn.go)
	workWriters       *workWriters
	workStopOnce      sync.Once
	clientsHeard      *heardClients              // leader: when each client was last heard
	spreadCache       spreadCache                // leader: the spread it answers relays with
	spread            atomic.Pointer[spreadView] // the newest spread the leader told this server
	reports           *reportGroup               // the clients' reports, group-committed (reportgroup.go)

	notifyCh chan bool
	ld       leadership

	// restoreMu is held shared by every raft apply of this node and
	// exclusively by a snapshot restore (backup.go).
	restoreMu sync.RWMutex

	leavingMu sync.Mutex
	leaving   map[string]time.Time // servers that asked the leader to remove them

	started     atomic.Bool
	leavingSelf atomic.Bool   // Leave was called: gossip says so before leaving
	inSync      atomic.Bool   // see sync.go
	stalls      *StallWatch   // the sync loop's polls (stall.go)
	syncFlipped chan struct{} // inSync changed: gossip it (syncmeta.go)
	closing     chan struct{}
	closeMu     sync.Mutex
	closed      bool
	wg          sync.WaitGroup
	bootOnce    sync.Once
}

// New prepares a node: it opens the raft log and snapshot store, brings f
// up to the newest snapshot if f is behind it (see OpenFSM), starts raft and
// the gossip listener. self describes this agent (capacity, labels, drivers,
// version); its name and addresses are taken from cfg. Call Start next.
func New(cfg Config, f *fsm.FSM, self fsm.Node, logger *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.WorkStreams = cfg.WorkStreams.withDefaults()
	cfg.Clients = cfg.Clients.withDefaults()
	cfg.Spread = cfg.Spread.withDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "cluster", "node", cfg.Name)
	advertiseIP, err := cfg.advertiseIP()
	if err != nil {
		return nil, err
	}
	bindIP := cfg.bindIP()
	self.Name = cfg.Name
	self.HTTPAddr = hostPort(advertiseIP, cfg.Port)
	self.RaftAddr = hostPort(advertiseIP, cfg.Port+1)
	self.GossipAddr = hostPort(advertiseIP, cfg.Port+2)

	state, err := loadStateStore(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if self.Slots == 0 {
		self.Slots = cfg.Slots
	}
	if cfg.Replica {
		self.Role = fsm.RoleReplica
	}
	n := &Node{
		cfg: cfg, logger: logger, fsm: f, self: self, heard: newHeardTracker(),
		members: newMemberTable(), state: state, client: newForwardClient(cfg.bindIP(), cfg.Network, cfg.TLS),
		notifyCh: make(chan bool, 16), closing: make(chan struct{}), syncFlipped: make(chan struct{}, 1), stalls: NewStallWatch(),
		attached: newClientTable(), clientsHeard: newHeardClients(), workStop: make(chan struct{}),
		workWriters: newWorkWriters(),
	}
	n.workWaker = newWorkWaker(f.Events(), n.InContactWithLeader, func() (s string) {
		_ = f.View(func(tx *fsm.Tx) error { s = tx.ACLInternalSecret(); return nil })
		return s
	})
	n.reports = newReportGroup(n.Apply)
	n.ld.init()
	if cfg.InternalAuth != nil {
		n.client.Transport = internalAuth{base: n.client.Transport, set: cfg.InternalAuth}
	}

	removeTempFiles(cfg.DataDir, logger)
	if n.storage, err = openRaftStorage(cfg.DataDir, cfg.NoSync, logger); err != nil {
		return nil, err
	}
	fail := func(err error) (*Node, error) {
		n.teardown()
		return nil, err
	}
	if err := n.storage.restoreIfBehind(f, logger); err != nil {
		return fail(err)
	}
	if err := n.refreshMeta(); err != nil {
		return fail(err)
	}
	if err := n.startRaft(bindIP, advertiseIP); err != nil {
		return fail(err)
	}
	if n.ml, err = n.newMemberlist(bindIP, advertiseIP); err != nil {
		return fail(err)
	}
	return n, nil
}

func (n *Node) startRaft(bindIP, advertiseIP string) error {
	adv, err := net.ResolveTCPAddr("tcp", hostPort(advertiseIP, n.cfg.Port+1))
	if err != nil {
		return fmt.Errorf("raft advertise address: %w", err)
	}
	stream, err := newStreamLayer(hostPort(bindIP, n.cfg.Port+1), adv, n.cfg.Network, n.heard, n.cfg.TLS)
	if err != nil {
		return err
	}
	hl := hclog.New(&hclog.LoggerOptions{
		Name: "raft", Level: hclog.LevelFromString(n.cfg.RaftLogLevel), Output: slogWriter(n.logger, "raft"), DisableTime: true,
	})
	n.trans = newRaftTransport(raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hl,
	}))
	t := n.cfg.Raft
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.Name)
	rc.HeartbeatTimeout, rc.ElectionTimeout = t.HeartbeatTimeout, t.ElectionTimeout
	rc.LeaderLeaseTimeout, rc.CommitTimeout = t.LeaderLeaseTimeout, t.CommitTimeout
	rc.MaxAppendEntries, rc.BatchApplyCh = t.MaxAppendEntries, true
	rc.SnapshotInterval, rc.SnapshotThreshold, rc.TrailingLogs = t.SnapshotInterval, t.SnapshotThreshold, t.TrailingLogs
	rc.NoSnapshotRestoreOnStart = true // New already restored the FSM when it was behind
	rc.NotifyCh = n.notifyCh
	rc.Logger = hl
	r, err := raft.NewRaft(rc, n.fsm, n.storage.logs, n.storage.bolt, n.storage.snaps, n.trans)
	if err != nil {
		n.trans.Close()
		return fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	n.trans.setRaft(r)
	return nil
}

// Start joins the configured and remembered peers, bootstraps when the
// configuration says so, and starts the background loops. A join refused
// because the peer belongs to another cluster is returned as an error;
// unreachable peers are retried in the background.
func (n *Node) Start(ctx context.Context) error {
	if !n.started.CompareAndSwap(false, true) {
		return errors.New("cluster: Start called twice")
	}
	n.goLoop(n.leadershipLoop)
	n.goLoop(n.clusterIDLoop)
	n.goLoop(n.peersLoop)
	n.goLoop(n.syncLoop)
	n.goLoop(n.syncGossipLoop)
	n.goLoop(n.compactLoop)
	n.goLoop(n.relayBeatsLoop)
	n.goLoop(n.workStopLoop)
	n.goLoop(n.spreadLoop)
	for range workWriterCount {
		n.goLoop(n.writeWorkLoop)
	}

	targets := n.joinTargets()
	if len(targets) > 0 {
		err := n.joinGossip(targets)
		if errors.Is(err, ErrClusterMismatch) {
			return err
		}
		if err != nil {
			n.logger.Warn("cannot reach any peer yet; retrying in the background", "peers", targets, "err", err)
			n.goLoop(func() { n.retryJoin(targets) })
		}
	}
	n.goLoop(n.bootstrapLoop)
	return nil
}

func (n *Node) goLoop(fn func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
}

// Name is this node's name (its raft server ID and gossip name).
func (n *Node) Name() string { return n.cfg.Name }

// Self is this node's self-description with its advertised addresses.
func (n *Node) Self() fsm.Node {
	n.selfMu.Lock()
	defer n.selfMu.Unlock()
	return n.self
}

// ClusterID is the cluster's identity once known ("" before the first
// leader committed it and this node learnt it).
func (n *Node) ClusterID() string { return n.state.get().ClusterID }

// Shutdown stops this node without leaving the raft configuration: it
// transfers leadership away if it leads, leaves gossip (so peers see "left"
// at once instead of waiting for the failure detector), stops raft cleanly
// and closes the FSM. A restarted node resumes as the same server.
func (n *Node) Shutdown(ctx context.Context) error {
	if n.IsLeader() && n.hasOtherVoters() {
		f := n.raft.LeadershipTransfer()
		if err := waitFuture(ctx, f); err != nil {
			n.logger.Warn("leadership transfer failed; shutting down anyway", "err", err)
		}
	}
	if n.ml != nil {
		if err := n.ml.Leave(leaveTimeout(ctx)); err != nil {
			n.logger.Warn("gossip leave failed", "err", err)
		}
	}
	return n.close(ctx)
}

// Leave removes this node from the cluster for good: the leader drops it
// from the raft configuration, then it shuts down as Shutdown does.
func (n *Node) Leave(ctx context.Context) error {
	n.leavingSelf.Store(true)
	if err := n.refreshMeta(); err != nil {
		n.logger.Warn("cannot announce the leave in gossip", "err", err)
	}
	if err := n.removeSelf(ctx); err != nil {
		return err
	}
	if n.ml != nil {
		if err := n.ml.Leave(leaveTimeout(ctx)); err != nil {
			n.logger.Warn("gossip leave failed", "err", err)
		}
	}
	return n.close(ctx)
}

// Kill stops the node abruptly: no leadership transfer, no gossip leave, no
// clean FSM close (the state file is left as a crashed process leaves it,
// minus the OS-level page cache effects). For tests of crash recovery.
func (n *Node) Kill() {
	if !n.markClosed() {
		return
	}
	n.ld.stop()
	n.stopRaft()
	n.wg.Wait()
	n.storage.close()
	n.client.CloseIdleConnections()
}

func (n *Node) close(ctx context.Context) error {
	if !n.markClosed() {
		return nil
	}
	n.ld.stop()
	n.waitLeaderFns(ctx)
	errs := n.stopRaft()
	n.wg.Wait()
	n.client.CloseIdleConnections()
	errs = append(errs, n.storage.close(), n.fsm.Close())
	return errors.Join(errs...)
}

// markClosed marks the node closed and closes n.closing; false if it
// already was.
func (n *Node) markClosed() bool {
	n.closeMu.Lock()
	defer n.closeMu.Unlock()
	if n.closed {
		return false
	}
	n.closed = true
	close(n.closing)
	return true
}

// stopRaft shuts down gossip, raft and the transport, those that New got
// to, in that order.
func (n *Node) stopRaft() []error {
	var errs []error
	if n.ml != nil {
		errs = append(errs, n.ml.Shutdown())
	}
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
	}
	if n.trans != nil {
		errs = append(errs, n.trans.Close())
	}
	return errs
}

// waitLeaderFns gives the functions registered with OnLeadership (their
// context is already cancelled) until ctx ends to return, so they do not
// read a closed FSM.
func (n *Node) waitLeaderFns(ctx context.Context) {
	n.ld.mu.Lock()
	gen := n.ld.gen
	n.ld.mu.Unlock()
	done := make(chan struct{})
	go func() { gen.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		n.logger.Warn("leadership functions still running at shutdown")
	}
}

// teardown undoes a partial New.
func (n *Node) teardown() {
	n.stopRaft()
	if n.storage != nil {
		n.storage.close()
	}
}

func (n *Node) hasOtherVoters() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID != raft.ServerID(n.cfg.Name) && s.Suffrage == raft.Voter {
			return true
		}
	}
	return false
}

func leaveTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			return d
		}
		return time.Millisecond
	}
	return 5 * time.Second
}

// waitFuture waits for a raft future but gives up when ctx ends.
func waitFuture(ctx context.Context, f raft.Future) error {
	return waitUntil(f, ctx.Done(), ctx.Err)
}

// waitOrClose waits for f, or until the node closes (ErrShutdown): raft
// never answers an apply or barrier still queued when it shuts down
// (BatchApplyCh buffers them), and the goroutine waiting on it kept Kill
// and Shutdown from returning.
func (n *Node) waitOrClose(f raft.Future) error {
	return waitUntil(f, n.closing, func() error { return ErrShutdown })
}

// waitUntil waits for f, or returns giveUp() once stop is closed.
func waitUntil(f raft.Future, stop <-chan struct{}, giveUp func() error) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-stop:
		return giveUp()
	}
}

// refreshMeta recomputes the gossip meta and pushes it to peers.
func (n *Node) refreshMeta() error {
	hasState := false
	if n.raft != nil {
		hasState = n.raft.LastIndex() > 0
	} else if ok, err := n.storage.hasState(); err == nil {
		hasState = ok
	}
	m := metaFromNode(n.Self(), n.ClusterID(), hasState, n.leavingSelf.Load())
	m.Applied, m.Behind = n.fsm.AppliedIndex(), !n.InSync()
	m.Features = n.advertisedFeatures()
	b, err := m.encode()
	if err != nil {
		return err
	}
	old := n.meta.Swap(&b)
	if n.ml == nil || (old != nil && string(*old) == string(b)) {
		return nil
	}
	// UpdateNode waits for the broadcast to go out, which never happens once
	// gossip is shut down: do not let that hold up Shutdown for TCPTimeout
	// (the agent's running jobs count on a quick restart to keep their lease).
	done := make(chan error, 1)
	go func() { done <- n.ml.UpdateNode(n.cfg.Gossip.TCPTimeout) }()
	select {
	case err := <-done:
		return err
	case <-n.closing:
		return ErrShutdown
	}
}
