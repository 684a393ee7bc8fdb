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
	switch name {
	case "none":
		return None{}, nil
	case "halves", "isolate-leader", "ring", "bridge", "isolate-client":
		return &Partition{Kind: name}, nil
	case "kill-client":
		return &Kill{oneNode{Client: true}}, nil
	case "down-client":
		return &DownClient{}, nil
	case "pause-client":
		return &Pause{oneNode{Client: true}}, nil
	case "kill-leader":
		return &Kill{oneNode{Leader: true}}, nil
	case "kill-random":
		return &Kill{}, nil
	case "pause-leader":
		return &Pause{oneNode{Leader: true}}, nil
	case "pause-random":
		return &Pause{}, nil
	case "member":
		return &Member{}, nil
	case "pause-flicker":
		return &Flicker{}, nil
	case "clock":
		return &Clock{}, nil
	case "storm":
		return &Storm{}, nil
	case "store-down":
		return &StoreDown{}, nil
	case "store-down-kill":
		return &StoreDownKill{}, nil
	}
	return nil, fmt.Errorf("unknown nemesis %q", name)
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
