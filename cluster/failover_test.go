package cluster_test

import (
	"testing"

	"github.com/foreman-sched/foreman/cluster/clustertest"
)

// A three-node cluster loses its leader: a new one is elected, writes
// through a follower keep working, and after the old leader restarts (with
// no join flags) every acknowledged job is on every node.
func TestThreeNodesSurviveLeaderLoss(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	leader := c.WaitForLeader()

	var acked []string
	for _, f := range c.Followers() {
		acked = append(acked, submit(t, f)) // forwarded to the leader
	}
	acked = append(acked, submit(t, leader))

	c.Kill(leader.Index)
	newLeader := c.WaitForLeader()
	if newLeader.Name == leader.Name {
		t.Fatalf("the killed node %s is still leader", leader.Name)
	}
	for range 5 {
		acked = append(acked, submit(t, c.Followers()[0]))
	}

	c.Restart(leader.Index)
	c.WaitForLeader()
	c.WaitConverged()
	for _, nd := range c.Live() {
		for _, id := range acked {
			if err := hasJob(nd, id); err != nil {
				t.Fatal(err)
			}
		}
	}
}
