package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
)

func removePeer(c *clustertest.Cluster, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	return c.WaitForLeader().RemovePeer(ctx, name)
}

func transfer(c *clustertest.Cluster, to string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	return c.WaitForLeader().TransferLeadership(ctx, to)
}

// waitUnhealthy waits until the leader has not heard from name for longer
// than the test clusters' LeaderContactTimeout (1.5 s): until then a voter
// that just died still counts as healthy.
func waitUnhealthy(c *clustertest.Cluster, name string) {
	c.Eventually(clustertest.ConvergeTimeout, name+" silent to the leader", func() error {
		for _, s := range c.WaitForLeader().RaftInfo().Servers {
			if s.ID != name {
				continue
			}
			ago, err := time.ParseDuration(s.LastHeardAgo)
			if s.LastHeardAgo != "" && (err != nil || ago < 2*time.Second) {
				return fmt.Errorf("last heard %s ago", s.LastHeardAgo)
			}
		}
		return nil
	})
}

func otherThan(c *clustertest.Cluster, names ...string) *clustertest.Node {
	for _, nd := range c.Live() {
		skip := false
		for _, n := range names {
			skip = skip || nd.Name == n
		}
		if !skip {
			return nd
		}
	}
	return nil
}

// remove-peer refuses the leader, unknown servers and any removal that
// leaves the voters without a healthy majority; it removes a dead voter.
func TestRemovePeer(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{DeadServerTimeout: 10 * clustertest.ConvergeTimeout})
	leader := c.WaitForLeader()
	dead := otherThan(c, leader.Name)
	healthy := otherThan(c, leader.Name, dead.Name)
	c.Kill(dead.Index)
	waitUnhealthy(c, dead.Name)

	for _, tc := range []struct {
		name string
		want error
	}{
		{leader.Name, cluster.ErrRefused},
		{"nobody", cluster.ErrUnknownServer},
		{healthy.Name, cluster.ErrRefused}, // leaves leader + dead: no quorum
	} {
		err := removePeer(c, tc.name)
		if !errors.Is(err, tc.want) {
			t.Fatalf("remove-peer %s: %v, want %v", tc.name, err, tc.want)
		}
		t.Logf("remove-peer %s: %v", tc.name, err)
		if n := len(c.WaitForLeader().RaftInfo().Servers); n != 3 {
			t.Fatalf("refused remove-peer %s changed the configuration: %d servers", tc.name, n)
		}
	}

	if err := removePeer(c, dead.Name); err != nil {
		t.Fatalf("remove-peer of the dead voter: %v", err)
	}
	c.Eventually(clustertest.ConvergeTimeout, dead.Name+" removed", func() error {
		if s := suffrageOf(c.WaitForLeader(), dead.Name); s != "" {
			return fmt.Errorf("%s still a %s", dead.Name, s)
		}
		return nil
	})
	// Two healthy voters left: the follower may go (one voter remains, healthy).
	if err := removePeer(c, healthy.Name); err != nil {
		t.Fatalf("remove-peer %s: %v", healthy.Name, err)
	}
	// The last voter is the leader.
	if err := removePeer(c, leader.Name); !errors.Is(err, cluster.ErrRefused) {
		t.Fatalf("remove-peer of the last voter: %v, want refused", err)
	}
	if _, err := trySubmit(c.WaitForLeader()); err != nil {
		t.Fatalf("the remaining voter cannot commit: %v", err)
	}
}

// transfer-leadership moves the leader to the named voter or to any
// healthy one, and refuses non-voters, dead voters and unknown names.
func TestTransferLeadership(t *testing.T) {
	c := clustertest.NewCluster(t, 4, clustertest.Options{Voters: 3, DeadServerTimeout: 10 * clustertest.ConvergeTimeout})
	leader := c.WaitForLeader()
	nonvoter := c.Node(3)
	if got := suffrageOf(leader, nonvoter.Name); got != "nonvoter" {
		t.Fatalf("%s is %q, want nonvoter", nonvoter.Name, got)
	}
	to := otherThan(c, leader.Name, nonvoter.Name)
	got, err := transfer(c, to.Name)
	if err != nil || got != to.Name {
		t.Fatalf("transfer to %s: got %q, %v", to.Name, got, err)
	}
	if l := c.WaitForLeader(); l.Name != to.Name {
		t.Fatalf("leader is %s, want %s", l.Name, to.Name)
	}
	if got, err := transfer(c, to.Name); err != nil || got != to.Name {
		t.Fatalf("transfer to the leader itself: %q, %v", got, err)
	}

	dead := otherThan(c, to.Name, nonvoter.Name)
	c.Kill(dead.Index)
	waitUnhealthy(c, dead.Name)
	for name, want := range map[string]error{dead.Name: cluster.ErrRefused, nonvoter.Name: cluster.ErrRefused, "nobody": cluster.ErrUnknownServer} {
		if _, err := transfer(c, name); !errors.Is(err, want) {
			t.Fatalf("transfer to %s: %v, want %v", name, err, want)
		}
	}
	if l := c.WaitForLeader(); l.Name != to.Name {
		t.Fatalf("a refused transfer moved the leader to %s", l.Name)
	}

	// Without a target: the one healthy voter left.
	want := otherThan(c, to.Name, nonvoter.Name, dead.Name)
	got, err = transfer(c, "")
	if err != nil || got != want.Name {
		t.Fatalf("transfer to any: %q, %v (want %s)", got, err, want.Name)
	}
}

// A lone voter has nobody to hand leadership to and cannot remove itself.
func TestRaftOpsOnALoneVoter(t *testing.T) {
	c := clustertest.NewCluster(t, 1, clustertest.Options{})
	l := c.WaitForLeader()
	if _, err := transfer(c, ""); !errors.Is(err, cluster.ErrRefused) {
		t.Fatalf("transfer with no other voter: %v, want refused", err)
	}
	if err := removePeer(c, l.Name); !errors.Is(err, cluster.ErrRefused) {
		t.Fatalf("remove-peer of the last voter: %v, want refused", err)
	}
	if !l.IsLeader() {
		t.Fatalf("the lone voter lost leadership")
	}
}
