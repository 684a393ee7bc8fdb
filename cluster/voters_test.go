package cluster_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

// Five nodes with three voters: the first three join as voters, the other
// two as non-voters. When a voter dies, the leader waits DeadServerTimeout,
// promotes a healthy non-voter and removes the dead voter.
func TestFiveNodesKeepThreeVoters(t *testing.T) {
	c := clustertest.NewCluster(t, 5, clustertest.Options{Voters: 3, DeadServerTimeout: 2 * time.Second})
	leader := c.WaitForLeader()
	for i, want := range []string{"voter", "voter", "voter", "nonvoter", "nonvoter"} {
		if got := suffrageOf(leader, c.Node(i).Name); got != want {
			t.Fatalf("%s is %q, want %q (servers %+v)", c.Node(i).Name, got, want, leader.RaftInfo().Servers)
		}
	}

	// Kill a voter that is not the leader, so the story is only about
	// replacement.
	victim := c.Node(0)
	if victim.Name == leader.Name {
		victim = c.Node(1)
	}
	c.Kill(victim.Index)

	c.Eventually(clustertest.ConvergeTimeout, "dead voter replaced", func() error {
		l := c.Leader()
		if l == nil {
			return errNotYet
		}
		voters := 0
		for _, s := range l.RaftInfo().Servers {
			if s.ID == victim.Name {
				return fmt.Errorf("%s still in the configuration as %s", victim.Name, s.Suffrage)
			}
			if s.Suffrage == "voter" {
				voters++
			}
		}
		if voters != 3 {
			return fmt.Errorf("%d voters, want 3", voters)
		}
		return nil
	})

	// The dead node's record says dead.
	c.Eventually(clustertest.ConvergeTimeout, victim.Name+" recorded dead", func() error {
		rec, err := nodeRecord(c.WaitForLeader(), victim.Name)
		if err != nil {
			return err
		}
		if rec.Gossip != fsm.NodeDead {
			return fmt.Errorf("gossip state %q", rec.Gossip)
		}
		return nil
	})
	submit(t, c.Followers()[0])
}

// Every member's self-description reaches the FSM through the leader's
// reconcile loop, and a graceful Leave takes the node out of raft and marks
// it left.
func TestMembershipRecordsAndLeave(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	leader := c.WaitForLeader()
	c.Eventually(clustertest.ConvergeTimeout, "all node records", func() error {
		for _, nd := range c.Nodes() {
			rec, err := nodeRecord(leader, nd.Name)
			if err != nil {
				return err
			}
			if rec.HTTPAddr != nd.Self().HTTPAddr || rec.RaftAddr != nd.Self().RaftAddr || rec.Capacity.CPU != 2000 || rec.Labels["index"] != fmt.Sprint(nd.Index) {
				return fmt.Errorf("record %+v", rec)
			}
		}
		return nil
	})

	leaving := c.Followers()[0]
	if err := leaving.Leave(t.Context()); err != nil {
		t.Fatalf("leave: %v", err)
	}
	c.Eventually(clustertest.ConvergeTimeout, leaving.Name+" out of raft and left", func() error {
		l := c.Leader()
		if l == nil {
			return errNotYet
		}
		if s := suffrageOf(l, leaving.Name); s != "" {
			return fmt.Errorf("still a %s", s)
		}
		rec, err := nodeRecord(l, leaving.Name)
		if err != nil {
			return err
		}
		if rec.Gossip != fsm.NodeLeft {
			return fmt.Errorf("gossip state %q", rec.Gossip)
		}
		return nil
	})
}

// Three nodes started together with BootstrapExpect 3 form one cluster with
// three voters and one cluster ID.
func TestBootstrapExpectFormsOneCluster(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{BootstrapExpect: true})
	leader := c.WaitForLeader()
	for _, nd := range c.Nodes() {
		if got := suffrageOf(leader, nd.Name); got != "voter" {
			t.Fatalf("%s is %q, want voter", nd.Name, got)
		}
	}
	submit(t, c.Followers()[0])
	c.Eventually(clustertest.ConvergeTimeout, "one cluster ID everywhere", func() error {
		for _, nd := range c.Nodes() {
			if nd.ClusterID() == "" || nd.ClusterID() != leader.ClusterID() {
				return fmt.Errorf("%s has cluster ID %q, leader %q", nd.Name, nd.ClusterID(), leader.ClusterID())
			}
		}
		return nil
	})
	c.WaitConverged()
}

// Replicas (Config.Replica) join as non-voters, are recorded with their
// role, and are never promoted: with a voter dead, the leader keeps two
// voters rather than make a replica vote.
func TestReplicasAreNeverPromoted(t *testing.T) {
	c := clustertest.NewCluster(t, 5, clustertest.Options{Voters: 3, DeadServerTimeout: 2 * time.Second,
		Configure: func(i int, cfg *cluster.Config) { cfg.Replica = i >= 3 }})
	leader := c.WaitForLeader()
	for i, want := range []string{"voter", "voter", "voter", "nonvoter", "nonvoter"} {
		if got := suffrageOf(leader, c.Node(i).Name); got != want {
			t.Fatalf("%s is %q, want %q (servers %+v)", c.Node(i).Name, got, want, leader.RaftInfo().Servers)
		}
	}
	c.Eventually(clustertest.ConvergeTimeout, "replicas recorded", func() error {
		for _, i := range []int{3, 4} {
			rec, err := nodeRecord(leader, c.Node(i).Name)
			if err != nil {
				return err
			}
			if rec.Role != fsm.RoleReplica {
				return fmt.Errorf("%s recorded with role %q", rec.Name, rec.Role)
			}
		}
		return nil
	})
	victim := c.Node(0)
	if victim.Name == leader.Name {
		victim = c.Node(1)
	}
	c.Kill(victim.Index)
	// Past DeadServerTimeout the dead voter would be replaced by a healthy
	// non-voter; replicas are not candidates, so it stays and none votes.
	c.Eventually(clustertest.ConvergeTimeout, victim.Name+" recorded dead", func() error {
		rec, err := nodeRecord(c.WaitForLeader(), victim.Name)
		if err != nil {
			return err
		}
		if rec.Gossip != fsm.NodeDead {
			return fmt.Errorf("gossip state %q", rec.Gossip)
		}
		return nil
	})
	deadline := time.Now().Add(3 * 2 * time.Second) // three DeadServerTimeouts after the death was recorded
	for time.Now().Before(deadline) {
		l := c.WaitForLeader()
		for _, i := range []int{3, 4} {
			if got := suffrageOf(l, c.Node(i).Name); got != "nonvoter" {
				t.Fatalf("replica %s became %q after %s died", c.Node(i).Name, got, victim.Name)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	submit(t, c.Followers()[0])
}

// GET /v1/internal/voters, which a fresh agent with only --join asks to
// choose its role: a forming cluster is short of voters, a formed one is
// full, and a follower answers as the leader does.
func TestVotersInfoTellsAFreshAgentItsRole(t *testing.T) {
	c := clustertest.NewCluster(t, 1, clustertest.Options{Voters: 3})
	c.WaitForLeader()
	base := fmt.Sprintf("http://127.0.0.1:%d", c.Node(0).Port)
	info, err := cluster.FetchVoters(t.Context(), http.DefaultClient, base, nil)
	if err != nil || info != (cluster.VotersInfo{Voters: 1, Target: 3}) || info.Full() {
		t.Fatalf("one server of three: %+v, %v; want 1 voter of 3, not full", info, err)
	}

	c3 := clustertest.NewCluster(t, 3, clustertest.Options{Voters: 3})
	c3.WaitForLeader()
	c3.Eventually(10*time.Second, "three voters", func() error {
		for _, nd := range c3.Nodes() {
			info, err := cluster.FetchVoters(t.Context(), http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d", nd.Port), nil)
			if err != nil {
				return err
			}
			if !info.Full() || info.Voters != 3 {
				return fmt.Errorf("%s answers %+v", nd.Name, info)
			}
		}
		return nil
	})

	srv := httptest.NewServer(http.NotFoundHandler()) // an agent from before the route
	defer srv.Close()
	if _, err := cluster.FetchVoters(t.Context(), http.DefaultClient, srv.URL, nil); !errors.Is(err, cluster.ErrNoVotersRoute) {
		t.Fatalf("a peer without the route: %v, want ErrNoVotersRoute", err)
	}
}
