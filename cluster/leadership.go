package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/oklog/ulid/v2"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/wallclock"
)

// leadership tracks this node's current term as leader and the functions
// registered with OnLeadership.
type leadership struct {
	mu      sync.Mutex
	fns     []func(context.Context)
	term    uint64
	since   time.Time
	ctx     context.Context // nil unless leader
	cancel  context.CancelFunc
	ready   bool            // fns were started for ctx
	gen     *sync.WaitGroup // goroutines of the current (or last) term
	stopped bool
}

func (l *leadership) init() { l.gen = &sync.WaitGroup{} }

func (l *leadership) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.cancel != nil {
		l.cancel()
	}
	l.ctx, l.cancel, l.ready = nil, nil, false
}

// OnLeadership registers fn to run in its own goroutine each time this node
// becomes leader, after a raft barrier (so the FSM holds every entry of
// earlier terms). ctx is cancelled when leadership is lost or the node shuts
// down. A new term's functions start only after the previous term's ones
// have returned, so two copies never run on one node at once. Registering
// while already leader starts fn at once.
func (n *Node) OnLeadership(fn func(ctx context.Context)) {
	n.ld.mu.Lock()
	defer n.ld.mu.Unlock()
	n.ld.fns = append(n.ld.fns, fn)
	if n.ld.ready && n.ld.ctx != nil {
		n.runLeaderFn(n.ld.gen, n.ld.ctx, fn)
	}
}

func (n *Node) runLeaderFn(gen *sync.WaitGroup, ctx context.Context, fn func(context.Context)) {
	gen.Add(1)
	go func() {
		defer gen.Done()
		fn(ctx)
	}()
}

// IsLeader reports whether raft says this node is the leader.
func (n *Node) IsLeader() bool { return n.raft != nil && n.raft.State() == raft.Leader }

// LeaderSince is when (monotonic, local clock) this node became leader in
// its current term; the zero time when it is not leader.
func (n *Node) LeaderSince() time.Time {
	n.ld.mu.Lock()
	defer n.ld.mu.Unlock()
	if n.ld.ctx == nil {
		return time.Time{}
	}
	return n.ld.since
}

// leadershipLoop follows raft's NotifyCh. It re-reads the raft state on
// every signal, and compares terms, so coalesced or stale signals cannot
// leave an old term's context alive.
func (n *Node) leadershipLoop() {
	for {
		select {
		case <-n.notifyCh:
		case <-n.closing:
			return
		}
		leader := n.raft.State() == raft.Leader
		term := n.raft.CurrentTerm()
		n.ld.mu.Lock()
		if n.ld.stopped {
			n.ld.mu.Unlock()
			return
		}
		active := n.ld.ctx != nil
		if active && (!leader || term != n.ld.term) {
			n.logger.Info("lost leadership", "term", n.ld.term)
			n.ld.cancel()
			n.ld.ctx, n.ld.cancel, n.ld.ready = nil, nil, false
			active = false
		}
		if leader && !active {
			n.logger.Info("became leader", "term", term)
			ctx, cancel := context.WithCancel(context.Background())
			prev, gen := n.ld.gen, &sync.WaitGroup{}
			n.ld.ctx, n.ld.cancel, n.ld.term, n.ld.since, n.ld.gen = ctx, cancel, term, time.Now(), gen
			n.clientsHeard.reset() // what an earlier term heard proves nothing to this one
			n.goLoop(func() { n.leaderWork(ctx, prev, gen) })
		}
		n.ld.mu.Unlock()
	}
}

// leaderWork runs once per term: wait for the previous term's goroutines,
// barrier, make sure the cluster has an ID, start the registered functions
// and run the membership reconcile loop.
func (n *Node) leaderWork(ctx context.Context, prev, gen *sync.WaitGroup) {
	prevDone := make(chan struct{})
	go func() { prev.Wait(); close(prevDone) }()
	select {
	case <-prevDone:
	case <-ctx.Done():
		return
	}
	for {
		// Not Barrier(...).Error(): a barrier queued when raft shuts down
		// is never answered, and Kill waited for this goroutine forever (a
		// cluster test hung until CI's timeout).
		if err := waitFuture(ctx, n.raft.Barrier(n.cfg.ForwardTimeout)); err == nil {
			break
		} else if ctx.Err() != nil {
			return
		} else {
			n.logger.Warn("leader barrier failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	n.initClusterID(ctx)
	n.announceLeader(ctx)

	n.ld.mu.Lock()
	if n.ld.ctx != ctx {
		n.ld.mu.Unlock()
		return
	}
	n.ld.ready = true
	for _, fn := range n.ld.fns {
		n.runLeaderFn(gen, ctx, fn)
	}
	n.ld.mu.Unlock()

	n.runLeaderFn(gen, ctx, n.pushCommits)
	n.runLeaderFn(gen, ctx, n.clientLivenessLoop)
	gen.Add(1)
	defer gen.Done()
	n.reconcileLoop(ctx)
}

// initClusterID commits a fresh cluster ID if the FSM has none (the first
// leader of a new cluster). InitCluster is ignored once set, so two racing
// first leaders cannot change it.
func (n *Node) initClusterID(ctx context.Context) {
	var id string
	if err := n.fsm.View(func(tx *fsm.Tx) error { id = tx.ClusterID(); return nil }); err != nil || id != "" {
		return
	}
	cmd, err := fsm.NewCommand(fsm.CmdInit, wallclock.Now(), fsm.InitCluster{ClusterID: ulid.Make().String()})
	if err != nil {
		return
	}
	if _, err := n.applyLocal(ctx, cmd); err != nil {
		n.logger.Warn("cannot commit the cluster ID", "err", err)
	}
}

// announceLeader commits LeaderChanged for this term. Leader changes are
// not entries of their own in raft (its no-op is never applied), so this
// is what puts them in the event stream, in log order and at the same
// index on every node. Best effort: a failure means leadership was lost.
func (n *Node) announceLeader(ctx context.Context) {
	n.ld.mu.Lock()
	term := n.ld.term
	n.ld.mu.Unlock()
	cmd, err := fsm.NewCommand(fsm.CmdLeader, wallclock.Now(), fsm.LeaderChanged{Node: n.cfg.Name, Term: term})
	if err != nil {
		return
	}
	if _, err := n.applyLocal(ctx, cmd); err != nil {
		n.logger.Warn("cannot record the leader change", "err", err)
	}
}

// clusterIDLoop follows the FSM until it knows the cluster ID and this node
// has raft state, persisting the ID and updating the gossip meta.
func (n *Node) clusterIDLoop() {
	ch, cancel := n.fsm.Watch()
	defer cancel()
	for {
		var id string
		_ = n.fsm.View(func(tx *fsm.Tx) error { id = tx.ClusterID(); return nil })
		if id != "" && id != n.ClusterID() {
			if err := n.state.update(func(s *persistedState) { s.ClusterID = id }); err != nil {
				n.logger.Warn("cannot persist the cluster ID", "err", err)
			}
		}
		if err := n.refreshMeta(); err != nil && !errors.Is(err, ErrShutdown) {
			n.logger.Warn("cannot update gossip meta", "err", err)
		}
		if id != "" && n.raft.LastIndex() > 0 {
			return
		}
		select {
		case <-ch:
		case <-time.After(time.Second):
		case <-n.closing:
			return
		}
	}
}

// InContactWithLeader gates lease renewal. On the leader it is true while a
// quorum of voters (itself included) answered within LeaderContactTimeout,
// so a leader cut off from its quorum says no before raft steps it down. On
// a follower it is true while the last contact from a known leader is
// within LeaderContactTimeout.
func (n *Node) InContactWithLeader() bool {
	if n.raft == nil {
		return false
	}
	timeout := n.cfg.LeaderContactTimeout
	if n.IsLeader() {
		f := n.raft.GetConfiguration()
		if f.Error() != nil {
			return false
		}
		voters, ok := 0, 0
		for _, s := range f.Configuration().Servers {
			if s.Suffrage != raft.Voter {
				continue
			}
			voters++
			if s.ID == raft.ServerID(n.cfg.Name) {
				ok++
				continue
			}
			if t, heard := n.heard.get(string(s.Address)); heard && time.Since(t) < timeout {
				ok++
			}
		}
		return ok > voters/2
	}
	if addr, _ := n.raft.LeaderWithID(); addr == "" {
		return false
	}
	last := n.raft.LastContact()
	return !last.IsZero() && time.Since(last) < timeout
}

// LastHeardFrom is when the leader last received bytes from node over the
// raft connections it dialled (monotonic, local clock). It is only
// meaningful on the leader; elsewhere it returns false. The time is never
// earlier than the follower's own last contact with this leader, so a lease
// computed from it is conservative.
func (n *Node) LastHeardFrom(node string) (time.Time, bool) {
	if !n.IsLeader() {
		return time.Time{}, false
	}
	if node == n.cfg.Name {
		return time.Now(), true
	}
	if b, ok := n.clientsHeard.get(node); ok {
		return b.at, true // a client: heard through its beats (clientbeats.go)
	}
	f := n.raft.GetConfiguration()
	if f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if string(s.ID) == node {
				return n.heard.get(string(s.Address))
			}
		}
	}
	if m, ok := n.members.get(node); ok && m.RaftAddr != "" {
		return n.heard.get(m.RaftAddr)
	}
	return time.Time{}, false
}
