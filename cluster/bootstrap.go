package cluster

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/fsm"
)

// bootstrapPoll is how often a node waiting for BootstrapExpect peers looks
// at gossip again.
const bootstrapPoll = 200 * time.Millisecond

// bootstrapLoop bootstraps raft when the configuration asks for it and this
// node has no raft state. With BootstrapExpect N it waits until gossip shows
// N alive members without raft state (and none with it: then a cluster
// already exists and its leader will add this node), and bootstraps with all
// of them. Every node computes the same configuration from the same member
// set, and raft accepts identical concurrent bootstraps.
func (n *Node) bootstrapLoop() {
	if has, err := n.storage.hasState(); err != nil || has {
		return
	}
	expect := n.cfg.bootstrapExpect()
	if expect == 0 {
		return
	}
	for {
		if n.raft.LastIndex() > 0 {
			return // a leader added this node
		}
		fresh, existing := n.bootstrapCandidates()
		if existing {
			n.logger.Info("a cluster with raft state already exists in gossip; waiting to be added")
			return
		}
		if expect == 1 || len(fresh) >= expect {
			if expect == 1 {
				fresh = []Member{{Name: n.cfg.Name, RaftAddr: n.self.RaftAddr}}
			}
			n.bootstrap(fresh)
			return
		}
		select {
		case <-n.closing:
			return
		case <-time.After(bootstrapPoll):
		}
	}
}

// bootstrapCandidates returns alive members without raft state (this node
// included) and whether any alive member already has state.
func (n *Node) bootstrapCandidates() (fresh []Member, existing bool) {
	cid := n.ClusterID()
	for _, m := range n.members.list() {
		if m.Status != fsm.NodeAlive || m.RaftAddr == "" || m.Replica {
			continue // replicas join once there is a cluster
		}
		if cid != "" && m.ClusterID != "" && m.ClusterID != cid {
			continue
		}
		if m.HasState && m.Name != n.cfg.Name {
			existing = true
			continue
		}
		fresh = append(fresh, m)
	}
	return fresh, existing
}

// bootstrap writes the initial configuration: the first Voters members by
// name are voters, the rest non-voters.
func (n *Node) bootstrap(members []Member) {
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	var cfg raft.Configuration
	for i, m := range members {
		s := raft.Server{ID: raft.ServerID(m.Name), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Voter}
		if i >= n.cfg.Voters {
			s.Suffrage = raft.Nonvoter
		}
		cfg.Servers = append(cfg.Servers, s)
	}
	err := n.raft.BootstrapCluster(cfg).Error()
	switch {
	case err == nil:
		n.logger.Info("bootstrapped raft", "servers", len(cfg.Servers))
	case errors.Is(err, raft.ErrCantBootstrap):
		n.logger.Info("raft already has state; not bootstrapping")
	default:
		n.logger.Error("bootstrap failed", "err", err)
	}
	if err := n.refreshMeta(); err != nil {
		n.logger.Warn("cannot update gossip meta", "err", err)
	}
}

// joinTargets are the configured join addresses plus the remembered peers.
func (n *Node) joinTargets() []string {
	seen := map[string]bool{n.self.GossipAddr: true}
	var out []string
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, j := range n.cfg.Join {
		if a, err := joinAddr(j); err == nil {
			add(a)
		}
	}
	for _, p := range n.state.get().Peers {
		add(p)
	}
	return out
}

// Join contacts the given peers ("HOST" or "HOST:BASE") over gossip. It
// succeeds when at least one accepted; a peer of another cluster gives an
// error wrapping ErrClusterMismatch with the reason.
func (n *Node) Join(addrs []string) error {
	var targets []string
	for _, a := range addrs {
		t, err := joinAddr(a)
		if err != nil {
			return fmt.Errorf("join %q: %w", a, err)
		}
		targets = append(targets, t)
	}
	return n.joinGossip(targets)
}

func (n *Node) joinGossip(targets []string) error {
	if len(targets) == 0 {
		return fmt.Errorf("%w: no addresses", ErrJoin)
	}
	joined, err := n.ml.Join(targets)
	if joined > 0 {
		if err != nil {
			n.logger.Warn("some join addresses failed", "err", err)
		}
		return nil
	}
	if err == nil {
		return fmt.Errorf("%w: no peer answered", ErrJoin)
	}
	msg := err.Error()
	if i := strings.Index(msg, "refusing to join"); i >= 0 {
		reason := msg[i:]
		if j := strings.IndexAny(reason, "\n"); j >= 0 {
			reason = reason[:j]
		}
		return fmt.Errorf("%w: %s", ErrClusterMismatch, strings.TrimSpace(reason))
	}
	return fmt.Errorf("%w: %v", ErrJoin, err)
}

// retryJoin keeps trying the peers until gossip shows another member.
func (n *Node) retryJoin(targets []string) {
	for n.ml.NumMembers() < 2 {
		select {
		case <-n.closing:
			return
		case <-time.After(2 * time.Second):
		}
		if err := n.joinGossip(targets); err != nil {
			n.logger.Debug("join retry failed", "err", err)
		}
	}
}

// peersLoop remembers the gossip addresses of the other members so that a
// restart without --join finds the cluster again. Members that left
// gracefully are forgotten; dead ones are kept (they may come back).
func (n *Node) peersLoop() {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		var peers []string
		for _, m := range n.members.list() {
			if m.Name == n.cfg.Name || m.Status == fsm.NodeLeft || m.Addr == "" {
				continue
			}
			peers = append(peers, m.Addr)
		}
		if len(peers) > 0 {
			if err := n.state.update(func(s *persistedState) { s.Peers = peers }); err != nil {
				n.logger.Warn("cannot persist peers", "err", err)
			}
		}
		select {
		case <-n.closing:
			return
		case <-t.C:
		}
	}
}
