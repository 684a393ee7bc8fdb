package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/wallclock"
)

// leavingTTL is how long the leader refuses to re-add a server that asked
// to leave while its gossip still says alive.
const leavingTTL = 2 * time.Minute

func (n *Node) markLeaving(name string) {
	n.leavingMu.Lock()
	defer n.leavingMu.Unlock()
	if n.leaving == nil {
		n.leaving = map[string]time.Time{}
	}
	n.leaving[name] = time.Now()
}

func (n *Node) isLeaving(name string) bool {
	n.leavingMu.Lock()
	defer n.leavingMu.Unlock()
	t, ok := n.leaving[name]
	return ok && time.Since(t) < leavingTTL
}

// reconcileLoop runs on the leader: on every gossip change, and on a slow
// safety tick, bring the FSM's node records and the raft configuration in
// line with gossip.
func (n *Node) reconcileLoop(ctx context.Context) {
	tick := time.NewTicker(n.cfg.ReconcileInterval)
	defer tick.Stop()
	for {
		n.pollSuspects()
		wake := n.reconcile(ctx)
		var timer <-chan time.Time
		if !wake.IsZero() {
			timer = time.After(max(time.Until(wake), 10*time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-n.members.changed:
		case <-tick.C:
		case <-timer:
		}
	}
}

// reconcile makes one pass and returns when it next needs to run because
// of a DeadServerTimeout deadline (zero: no deadline pending).
func (n *Node) reconcile(ctx context.Context) time.Time {
	members := n.members.list()
	n.reconcileNodes(ctx, members)
	return n.reconcileRaft(members)
}

// sameCluster reports whether m may be part of this cluster.
func (n *Node) sameCluster(m Member) bool {
	cid := n.ClusterID()
	return m.ClusterID == "" || cid == "" || m.ClusterID == cid
}

// reconcileNodes commits UpsertNode for new or changed self-descriptions
// and SetNodeState for gossip changes.
func (n *Node) reconcileNodes(ctx context.Context, members []Member) {
	// Shared, read-only, sorted by name: with thousands of clients a copy
	// or a map of every record per pass cost more than the pass.
	var nodes []fsm.Node
	if err := n.fsm.View(func(tx *fsm.Tx) error {
		var err error
		nodes, err = tx.NodesShared()
		return err
	}); err != nil {
		n.logger.Warn("reconcile: cannot read nodes", "err", err)
		return
	}
	known := func(name string) (fsm.Node, bool) {
		i, ok := slices.BinarySearchFunc(nodes, name, func(nd fsm.Node, name string) int { return strings.Compare(nd.Name, name) })
		if !ok {
			return fsm.Node{}, false
		}
		return nodes[i], true
	}
	seen := map[string]bool{}
	enabled := n.FeatureGate().Enabled()
	for _, m := range members {
		seen[m.Name] = true
		if !n.sameCluster(m) || m.RaftAddr == "" {
			continue
		}
		cur, ok := known(m.Name)
		want := withoutHeld(n.memberNode(m), enabled)
		if ok {
			// A raft member's devices come in its own NodeGPUs (gossip
			// cannot carry them): they are not the leader's to change.
			want.GPUs, want.GPUDriver, want.CUDAVersion, want.GPUMemoryMode = cur.GPUs, cur.GPUDriver, cur.CUDAVersion, cur.GPUMemoryMode
		}
		alive := m.Status == fsm.NodeAlive || m.Status == fsm.NodeSuspect
		if alive && (!ok || describe(cur) != describe(want)) {
			if n.commit(ctx, fsm.CmdUpsertNode, fsm.UpsertNode{Node: want, KeepGPUs: true}) {
				cur, ok = want, true
				cur.Gossip = fsm.NodeAlive
			}
		}
		if ok && cur.Gossip != m.Status {
			n.commit(ctx, fsm.CmdNodeState, fsm.SetNodeState{Name: m.Name, Gossip: m.Status})
		}
	}
	// Nodes that gossip has forgotten (or never told this leader about) are
	// dead once this leader has had time to hear from everyone.
	if time.Since(n.LeaderSince()) < n.gossipGrace() {
		return
	}
	for _, nd := range nodes {
		if nd.Role == fsm.RoleClient {
			continue // not in gossip: heard through its beats (clientlive.go)
		}
		if !seen[nd.Name] && (nd.Gossip == fsm.NodeAlive || nd.Gossip == fsm.NodeSuspect) {
			n.commit(ctx, fsm.CmdNodeState, fsm.SetNodeState{Name: nd.Name, Gossip: fsm.NodeDead})
		}
	}
}

// gossipGrace is how long a new leader waits before treating a node it has
// no gossip about as dead: long enough for a push-pull round and a failure
// detection.
func (n *Node) gossipGrace() time.Duration {
	g := n.cfg.Gossip
	return g.PushPullInterval + time.Duration(g.SuspicionMult*g.SuspicionMaxTimeoutMult)*g.ProbeInterval
}

func (n *Node) memberNode(m Member) fsm.Node {
	if m.Name == n.cfg.Name {
		return n.Self()
	}
	return fsm.Node{
		Name: m.Name, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, GossipAddr: m.Addr,
		Capacity: m.Capacity, Labels: m.Labels, Drivers: m.Drivers, Version: m.Version, Slots: m.Slots,
		JobUsers: m.JobUsers, Role: replicaRole(m.Replica), Volumes: m.Volumes,
	}
}

func replicaRole(replica bool) string {
	if replica {
		return fsm.RoleReplica
	}
	return ""
}

// describe is the self-described part of a node record, for comparison
// (JSON so that nil and empty maps compare equal).
func describe(nd fsm.Node) string {
	b, _ := json.Marshal(fsm.Node{
		Name: nd.Name, HTTPAddr: nd.HTTPAddr, RaftAddr: nd.RaftAddr, GossipAddr: nd.GossipAddr,
		Capacity: nd.Capacity, Labels: nonEmpty(nd.Labels), Drivers: nd.Drivers, Version: nd.Version,
		Slots: nd.Slots, JobUsers: nd.JobUsers, Role: nd.Role, Volumes: nd.Volumes,
		GPUs: nd.GPUs, GPUDriver: nd.GPUDriver, CUDAVersion: nd.CUDAVersion, GPUMemoryMode: nd.GPUMemoryMode,
	})
	return string(b)
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func (n *Node) commit(ctx context.Context, t fsm.CommandType, payload any) bool {
	cmd, err := fsm.NewCommand(t, wallclock.Now(), payload)
	if err != nil {
		n.logger.Error("reconcile: build command", "type", t, "err", err)
		return false
	}
	if _, err := n.applyLocal(ctx, cmd); err != nil {
		level := slog.LevelWarn
		if errors.Is(err, fsm.ErrFeatureHeld) {
			level = slog.LevelDebug // retried once every server has it
		}
		n.logger.Log(ctx, level, "reconcile: commit failed", "type", t, "err", err)
		return false
	}
	return true
}

// withoutHeld leaves out of a node's self-description what some server
// could not apply yet (its volumes, until every server has the feature):
// the node is recorded without them, and again with them once the gate
// opens (its description then differs from the record).
func withoutHeld(nd fsm.Node, enabled fsm.FeatureSet) fsm.Node {
	if enabled&fsm.FeatureVolumes == 0 {
		nd.Volumes = nil
	}
	return nd
}

// reconcileRaft keeps the raft configuration in line with gossip: new
// servers join as voters up to Config.Voters and as non-voters after that;
// servers that left are removed; a voter dead for DeadServerTimeout is
// replaced by a healthy non-voter; a non-voter dead that long is removed.
func (n *Node) reconcileRaft(members []Member) (wake time.Time) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return time.Time{}
	}
	servers := f.Configuration().Servers
	inConfig := map[string]raft.Server{}
	voters := 0
	for _, s := range servers {
		inConfig[string(s.ID)] = s
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	byName := map[string]Member{}
	for _, m := range members {
		byName[m.Name] = m
	}
	timeout := n.cfg.RaftAddTimeout()

	// Add alive members that raft does not know (or knows at an old address).
	for _, m := range members {
		if m.Status != fsm.NodeAlive || m.RaftAddr == "" || !n.sameCluster(m) || m.Leaving || n.isLeaving(m.Name) {
			continue
		}
		s, ok := inConfig[m.Name]
		if ok && string(s.Address) == m.RaftAddr {
			continue
		}
		var err error
		if (ok && s.Suffrage == raft.Voter) || (!ok && voters < n.cfg.Voters && !m.Replica) {
			err = n.raft.AddVoter(raft.ServerID(m.Name), raft.ServerAddress(m.RaftAddr), 0, timeout).Error()
			if err == nil && !ok {
				voters++
			}
		} else {
			err = n.raft.AddNonvoter(raft.ServerID(m.Name), raft.ServerAddress(m.RaftAddr), 0, timeout).Error()
		}
		if err != nil {
			n.logger.Warn("reconcile: cannot add server", "server", m.Name, "err", err)
			return time.Time{}
		}
		n.logger.Info("added server to raft", "server", m.Name, "address", m.RaftAddr)
		inConfig[m.Name] = raft.Server{ID: raft.ServerID(m.Name), Address: raft.ServerAddress(m.RaftAddr)}
	}

	healthyNonvoter := func() (string, bool) {
		for _, s := range servers {
			m, ok := byName[string(s.ID)]
			if s.Suffrage == raft.Nonvoter && ok && m.Status == fsm.NodeAlive && !m.Leaving && !n.isLeaving(m.Name) && !m.Replica {
				return string(s.ID), true
			}
		}
		return "", false
	}
	promote := func(id string) bool {
		s := inConfig[id]
		if err := n.raft.AddVoter(s.ID, s.Address, 0, timeout).Error(); err != nil {
			n.logger.Warn("reconcile: cannot promote non-voter", "server", id, "err", err)
			return false
		}
		n.logger.Info("promoted non-voter", "server", id)
		s.Suffrage = raft.Voter
		inConfig[id] = s
		for i := range servers {
			if string(servers[i].ID) == id {
				servers[i].Suffrage = raft.Voter
			}
		}
		return true
	}
	remove := func(id, why string) {
		if err := n.raft.RemoveServer(raft.ServerID(id), 0, timeout).Error(); err != nil {
			n.logger.Warn("reconcile: cannot remove server", "server", id, "err", err)
			return
		}
		n.logger.Info("removed server from raft", "server", id, "reason", why)
	}

	for _, s := range servers {
		id := string(s.ID)
		if id == n.cfg.Name {
			continue
		}
		m, known := byName[id]
		if known && m.Status == fsm.NodeLeft {
			if s.Suffrage == raft.Voter {
				voters--
			}
			remove(id, "left")
			continue
		}
		deadSince := n.LeaderSince()
		switch {
		case known && m.Status == fsm.NodeDead:
			deadSince = m.Since
		case known:
			continue
		}
		due := deadSince.Add(n.cfg.DeadServerTimeout)
		if time.Now().Before(due) {
			if wake.IsZero() || due.Before(wake) {
				wake = due
			}
			continue
		}
		if s.Suffrage != raft.Voter {
			remove(id, "dead non-voter")
			continue
		}
		if nv, ok := healthyNonvoter(); ok && promote(nv) {
			remove(id, "dead voter replaced by "+nv)
		}
	}

	// After a graceful leave the voter count may be short: promote.
	for voters < n.cfg.Voters {
		nv, ok := healthyNonvoter()
		if !ok || !promote(nv) {
			break
		}
		voters++
	}
	return wake
}
