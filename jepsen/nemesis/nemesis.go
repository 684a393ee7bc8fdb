package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/foreman-sched/foreman/jepsen/rig"
)

// Nemesis is one fault: Start injects it, Stop heals it. Stop must be safe
// to call after a failed or skipped Start, since cleanup always calls it.
type Nemesis interface {
	Name() string
	// Start injects the fault and describes what it did (for the report).
	Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error)
	Stop(ctx context.Context, c *rig.Cluster) error
}

// ByName returns a nemesis of the given name: none, halves,
// isolate-leader, ring, bridge, kill-leader, kill-random, pause-leader,
// pause-random, member, pause-flicker, clock, storm, store-down (the
// object store stopped; scenarios with one), store-down-kill (and a node
// with uploads pending killed), and for scenarios
// with clients (agents outside raft) kill-client, pause-client,
// isolate-client (cut from every server) and down-client (a live client
// declared dead by an operator).
func ByName(name string) (Nemesis, error) {
	if mk, ok := nemeses[name]; ok {
		return mk(name), nil
	}
	return nil, fmt.Errorf("unknown nemesis %q", name)
}

// nemeses makes each nemesis ByName knows from its name.
var nemeses = map[string]func(name string) Nemesis{
	"none":            func(name string) Nemesis { return None{} },
	"halves":          func(name string) Nemesis { return &Partition{Kind: name} },
	"isolate-leader":  func(name string) Nemesis { return &Partition{Kind: name} },
	"ring":            func(name string) Nemesis { return &Partition{Kind: name} },
	"bridge":          func(name string) Nemesis { return &Partition{Kind: name} },
	"isolate-client":  func(name string) Nemesis { return &Partition{Kind: name} },
	"kill-client":     func(name string) Nemesis { return &Kill{oneNode{Client: true}} },
	"down-client":     func(name string) Nemesis { return &DownClient{} },
	"pause-client":    func(name string) Nemesis { return &Pause{oneNode{Client: true}} },
	"kill-leader":     func(name string) Nemesis { return &Kill{oneNode{Leader: true}} },
	"kill-random":     func(name string) Nemesis { return &Kill{} },
	"pause-leader":    func(name string) Nemesis { return &Pause{oneNode{Leader: true}} },
	"pause-random":    func(name string) Nemesis { return &Pause{} },
	"member":          func(name string) Nemesis { return &Member{} },
	"pause-flicker":   func(name string) Nemesis { return &Flicker{} },
	"clock":           func(name string) Nemesis { return &Clock{} },
	"storm":           func(name string) Nemesis { return &Storm{} },
	"store-down":      func(name string) Nemesis { return &StoreDown{} },
	"store-down-kill": func(name string) Nemesis { return &StoreDownKill{} },
}

// None is the fault-free baseline.
type None struct{}

func (None) Name() string { return "none" }
func (None) Start(context.Context, *rig.Cluster, *rand.Rand) (string, error) {
	return "no fault", nil
}
func (None) Stop(context.Context, *rig.Cluster) error { return nil }

// running lists the indices of running nodes.
func running(c *rig.Cluster) []int {
	var out []int
	for i, n := range c.Nodes {
		if n.Running() {
			out = append(out, i)
		}
	}
	return out
}

// target picks the leader (falling back to a random node when none is
// known) or a random running node.
func target(ctx context.Context, c *rig.Cluster, rng *rand.Rand, leader bool) (int, error) {
	if leader {
		if l, err := c.WaitLeader(ctx, 10*time.Second); err == nil {
			return l, nil
		}
	}
	r := running(c)
	if len(r) == 0 {
		return -1, fmt.Errorf("no running node")
	}
	return r[rng.IntN(len(r))], nil
}

// randomClient picks a running client (an agent outside raft).
func randomClient(c *rig.Cluster, rng *rand.Rand) (int, error) {
	var r []int
	for _, i := range running(c) {
		if c.Nodes[i].Client {
			r = append(r, i)
		}
	}
	if len(r) == 0 {
		return -1, fmt.Errorf("no running client")
	}
	return r[rng.IntN(len(r))], nil
}
