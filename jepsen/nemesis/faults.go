package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/foreman-sched/foreman/jepsen/netns"
	"github.com/foreman-sched/foreman/jepsen/rig"
)

// Partition applies a complete grudge with iptables INPUT DROP rules.
type Partition struct{ Kind string }

func (p *Partition) Name() string { return p.Kind }

func (p *Partition) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	nodes := make([]int, len(c.Nodes))
	for i := range nodes {
		nodes[i] = i
	}
	order := append([]int(nil), nodes...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var g netns.Grudge
	switch p.Kind {
	case "halves":
		g = Halves(order)
	case "isolate-leader":
		l, err := target(ctx, c, rng, true)
		if err != nil {
			return "", err
		}
		g = Isolate(l, nodes)
	case "ring":
		g = MajoritiesRing(order)
	case "bridge":
		g = Bridge(order)
	case "isolate-client":
		v, err := randomClient(c, rng)
		if err != nil {
			return "", err
		}
		g = Isolate(v, nodes)
	default:
		return "", fmt.Errorf("unknown partition %q", p.Kind)
	}
	return describe(c, g), c.Topo.Apply(g)
}

func (p *Partition) Stop(ctx context.Context, c *rig.Cluster) error { return c.Topo.Heal() }

func describe(c *rig.Cluster, g netns.Grudge) string {
	s := ""
	for i, n := range c.Nodes {
		if len(g[i]) == 0 {
			continue
		}
		s += n.Name + " drops"
		for _, j := range g[i] {
			s += " " + c.Nodes[j].Name
		}
		s += "; "
	}
	return s
}

// oneNode is the node a one-node fault (Kill, Pause) picks: the leader, a
// client, or any node.
type oneNode struct {
	Leader bool
	Client bool // a client, not the leader nor any node
	victim int  // the node picked; -1 before Start or when none was
}

// name is the fault's name: fault-leader, fault-client or fault-random.
func (t *oneNode) name(fault string) string {
	switch {
	case t.Leader:
		return fault + "-leader"
	case t.Client:
		return fault + "-client"
	}
	return fault + "-random"
}

// start picks the victim and does the fault to it (what describes it).
func (t *oneNode) start(ctx context.Context, c *rig.Cluster, rng *rand.Rand, what string, fault func(*rig.Node) error) (string, error) {
	t.victim = -1
	i, err := pick(ctx, c, rng, t.Leader, t.Client)
	if err != nil {
		return "", err
	}
	t.victim = i
	return what + " " + c.Nodes[i].Name, fault(c.Nodes[i])
}

// Kill crashes a node with kill -9 and restarts it from the same data dir.
type Kill struct{ oneNode }

func (k *Kill) Name() string { return k.name("kill") }

func (k *Kill) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	return k.start(ctx, c, rng, "kill -9", (*rig.Node).Kill9)
}

func (k *Kill) Stop(ctx context.Context, c *rig.Cluster) error {
	if k.victim < 0 || c.Nodes[k.victim].Running() {
		return nil
	}
	return c.Restart(k.victim)
}

// Pause freezes a node's agent with SIGSTOP (its jobs keep running: the
// zombie-executor case) and resumes it with SIGCONT.
type Pause struct{ oneNode }

func (p *Pause) Name() string { return p.name("pause") }

func (p *Pause) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	return p.start(ctx, c, rng, "SIGSTOP", (*rig.Node).Pause)
}

func (p *Pause) Stop(ctx context.Context, c *rig.Cluster) error {
	if p.victim < 0 {
		return nil
	}
	return c.Nodes[p.victim].Resume()
}

// Member gracefully stops a random follower (it leaves) and starts a new
// node that joins; the new node stays.
type Member struct{ added bool }

func (m *Member) Name() string { return "member" }

func (m *Member) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	l := c.Leader(ctx)
	var cands []int
	for _, i := range running(c) {
		if i != l {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("no follower to remove")
	}
	v := cands[rng.IntN(len(cands))]
	if err := c.Nodes[v].Stop(15 * time.Second); err != nil {
		return "", err
	}
	n, err := c.AddNode()
	if err != nil {
		return "", err
	}
	m.added = true
	return fmt.Sprintf("%s left (SIGTERM), %s joined", c.Nodes[v].Name, n.Name), nil
}

func (m *Member) Stop(ctx context.Context, c *rig.Cluster) error { return nil }

// pick is target, or a random client with client.
func pick(ctx context.Context, c *rig.Cluster, rng *rand.Rand, leader, client bool) (int, error) {
	if client {
		return randomClient(c, rng)
	}
	return target(ctx, c, rng, leader)
}
