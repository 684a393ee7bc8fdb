package cluster

import (
	"fmt"
	"log"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/foreman-sched/foreman/fsm"
)

// Member is one agent as this node's gossip sees it.
type Member struct {
	Name      string            `json:"name"`
	Addr      string            `json:"addr"` // gossip host:port
	HTTPAddr  string            `json:"http_addr"`
	RaftAddr  string            `json:"raft_addr"`
	Status    fsm.GossipState   `json:"status"`
	ClusterID string            `json:"cluster_id,omitempty"`
	Version   string            `json:"version,omitempty"`
	Capacity  fsm.Resources     `json:"capacity"`
	Labels    map[string]string `json:"labels,omitempty"`
	Drivers   []string          `json:"drivers,omitempty"`
	Slots     int               `json:"slots,omitempty"`
	JobUsers  []string          `json:"job_users,omitempty"`
	Volumes   []fsm.HostVolume  `json:"volumes,omitempty"`
	// Applied and Behind are the member's last gossiped sync state (meta.go).
	Applied  uint64 `json:"applied_index,omitempty"`
	Behind   bool   `json:"behind,omitempty"`
	HasState bool   `json:"has_raft_state"`
	Leaving  bool   `json:"leaving,omitempty"`
	Replica  bool   `json:"replica,omitempty"` // never promoted to voter
	// Features is what its build can apply beyond the baseline (meta.go).
	Features fsm.FeatureSet `json:"features,omitempty"`
	// Since is when this node saw the status change (monotonic, local).
	Since time.Time `json:"-"`
}

// memberTable is this node's view of gossip, fed by memberlist's event
// delegate. memberlist forgets dead nodes after GossipToTheDeadTime; the
// table keeps them so the leader can still commit their state.
type memberTable struct {
	mu      sync.Mutex
	members map[string]*Member
	changed chan struct{} // coalescing signal for the reconcile and bootstrap loops
}

func newMemberTable() *memberTable {
	return &memberTable{members: map[string]*Member{}, changed: make(chan struct{}, 1)}
}

func (t *memberTable) signal() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *memberTable) set(n *memberlist.Node, status fsm.GossipState) {
	m := Member{Name: n.Name, Addr: n.Address(), Status: status}
	if meta, err := decodeMeta(n.Meta); err == nil {
		m.HTTPAddr, m.RaftAddr, m.ClusterID, m.Version = meta.HTTPAddr, meta.RaftAddr, meta.ClusterID, meta.Version
		m.Capacity = fsm.Resources{CPU: meta.CPU, MemoryMB: meta.MemoryMB, Named: meta.Named}
		m.Labels, m.Drivers, m.HasState, m.Leaving = meta.Labels, meta.Drivers, meta.HasState, meta.Leaving
		m.Slots, m.Applied, m.Behind = meta.Slots, meta.Applied, meta.Behind
		m.JobUsers, m.Replica, m.Volumes = meta.JobUsers, meta.Replica, meta.volumes()
		m.Features = meta.Features
		m.Features = meta.Features
	}
	t.mu.Lock()
	old, ok := t.members[n.Name]
	m.Since = time.Now()
	if ok && old.Status == status {
		m.Since = old.Since
	}
	t.members[n.Name] = &m
	t.mu.Unlock()
	if !ok || !sameButSync(*old, m) {
		t.signal()
	}
}

// sameButSync reports whether a and b differ at most in their sync state.
// Every member gossips its applied index each second under load (and at
// once when it flips in or out of sync); the reconcile loop reads neither,
// and waking it for each cost the leader several percent of a core.
func sameButSync(a, b Member) bool {
	a.Applied, a.Behind, b.Applied, b.Behind = 0, false, 0, false
	return reflect.DeepEqual(a, b)
}

// setStatus changes only the status (used for suspect, which memberlist
// reports through Members() rather than an event).
func (t *memberTable) setStatus(name string, status fsm.GossipState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.members[name]; ok && m.Status != status {
		m.Status, m.Since = status, time.Now()
		t.signal()
	}
}

func (t *memberTable) get(name string) (Member, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.members[name]
	if !ok {
		return Member{}, false
	}
	return *m, true
}

// list returns the members sorted by name.
func (t *memberTable) list() []Member {
	t.mu.Lock()
	out := make([]Member, 0, len(t.members))
	for _, m := range t.members {
		out = append(out, *m)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// gossipDelegate implements memberlist's Delegate, EventDelegate,
// MergeDelegate and AliveDelegate. memberlist calls these from its own
// goroutines; none of them may block.
type gossipDelegate struct {
	n *Node
}

func (d gossipDelegate) NodeMeta(limit int) []byte {
	b := d.n.meta.Load()
	if b == nil || len(*b) > limit {
		return nil
	}
	return *b
}
func (d gossipDelegate) NotifyMsg([]byte)                           {}
func (d gossipDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d gossipDelegate) LocalState(join bool) []byte                { return nil }
func (d gossipDelegate) MergeRemoteState(buf []byte, join bool)     {}

func (d gossipDelegate) NotifyJoin(n *memberlist.Node)   { d.n.members.set(n, fsm.NodeAlive) }
func (d gossipDelegate) NotifyUpdate(n *memberlist.Node) { d.n.members.set(n, fsm.NodeAlive) }
func (d gossipDelegate) NotifyLeave(n *memberlist.Node) {
	// memberlist does not fill n.State here, so "left" is recognised by the
	// Leaving flag the node gossiped before leaving, or by its request to
	// the leader to be removed.
	status := fsm.NodeDead
	if meta, err := decodeMeta(n.Meta); (err == nil && meta.Leaving) || d.n.isLeaving(n.Name) {
		status = fsm.NodeLeft
	}
	d.n.members.set(n, status)
}

// NotifyMerge refuses a push-pull merge (a join) with a node of another
// cluster. memberlist calls it on both sides of a join; the joining side's
// Join returns this message.
func (d gossipDelegate) NotifyMerge(peers []*memberlist.Node) error {
	for _, p := range peers {
		if err := d.checkCluster(p); err != nil {
			return err
		}
	}
	return nil
}

// NotifyAlive keeps nodes of another cluster out of this one's gossip.
func (d gossipDelegate) NotifyAlive(p *memberlist.Node) error { return d.checkCluster(p) }

func (d gossipDelegate) checkCluster(p *memberlist.Node) error {
	if p.Name == d.n.cfg.Name && p.Address() == d.n.self.GossipAddr {
		return nil // this node itself
	}
	meta, err := decodeMeta(p.Meta)
	if err != nil {
		return nil // an old or foreign node without meta; raft membership checks again
	}
	ours := d.n.ClusterID()
	if ours != "" && meta.ClusterID != "" && meta.ClusterID != ours {
		return fmt.Errorf("refusing to join: this node belongs to cluster %s but the remote belongs to %s", ours, meta.ClusterID)
	}
	return nil
}

// newMemberlist creates the gossip layer bound to BindAddr:Port+2.
func (n *Node) newMemberlist(bindIP, advertiseIP string) (*memberlist.Memberlist, error) {
	g := n.cfg.Gossip
	mc := memberlist.DefaultLANConfig()
	mc.Name = n.cfg.Name
	mc.BindAddr, mc.BindPort = bindIP, n.cfg.Port+2
	mc.AdvertiseAddr, mc.AdvertisePort = advertiseIP, n.cfg.Port+2
	mc.ProbeInterval, mc.ProbeTimeout = g.ProbeInterval, g.ProbeTimeout
	mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = g.SuspicionMult, g.SuspicionMaxTimeoutMult
	mc.GossipInterval, mc.PushPullInterval, mc.TCPTimeout = g.GossipInterval, g.PushPullInterval, g.TCPTimeout
	mc.GossipToTheDeadTime = g.GossipToTheDeadTime
	mc.DeadNodeReclaimTime = g.GossipToTheDeadTime // a restarted node may come back on a new address
	mc.Logger = log.New(slogWriter(n.logger, "memberlist"), "", 0)
	d := gossipDelegate{n: n}
	mc.Delegate, mc.Events, mc.Merge, mc.Alive = d, d, d, d
	keys := n.cfg.GossipKeys
	// A keyring rotated through the API (keyring.go) was saved in the
	// data dir: it wins over --gossip-key, which may still name the old key.
	saved, err := LoadKeyring(n.cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("gossip keyring: %w", err)
	}
	if saved != nil {
		n.logger.Info("gossip keyring from the data dir (rotated through the API; it overrides --gossip-key)",
			"file", KeyringFile, "keys", len(saved), "primary", KeyFingerprint(saved[0]))
		keys = saved
	}
	if len(keys) > 0 {
		// Every packet and stream is AES-GCM sealed with the primary key;
		// a packet no key opens is dropped (and logged by memberlist).
		kr, err := memberlist.NewKeyring(keys, keys[0])
		if err != nil {
			return nil, fmt.Errorf("gossip keyring: %w", err)
		}
		mc.Keyring, n.keyring = kr, kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}

	inner, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{bindIP}, BindPort: n.cfg.Port + 2, Logger: mc.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("gossip listener on %s: %w", hostPort(bindIP, n.cfg.Port+2), err)
	}
	mc.Transport = newGossipTransport(inner, bindIP, n.cfg.Network)
	ml, err := memberlist.Create(mc)
	if err != nil {
		mc.Transport.Shutdown()
		return nil, fmt.Errorf("start gossip: %w", err)
	}
	return ml, nil
}

// pollSuspects copies memberlist's suspect state into the table; memberlist
// has no event for it.
func (n *Node) pollSuspects() {
	for _, mn := range n.ml.Members() {
		switch mn.State {
		case memberlist.StateSuspect:
			n.members.setStatus(mn.Name, fsm.NodeSuspect)
		case memberlist.StateAlive:
			n.members.setStatus(mn.Name, fsm.NodeAlive)
		}
	}
}
