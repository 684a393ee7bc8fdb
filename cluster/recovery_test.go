package cluster_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
)

// A node killed mid-flight (no leave, no clean close) and restarted from its
// data directory with no join flags catches up: every node ends at the same
// index with the same state hash.
func TestKillAndRestartConverges(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	leader := c.WaitForLeader()
	victim := c.Followers()[0]

	submitMany(t, leader, 20)
	c.Kill(victim.Index)
	submitMany(t, c.WaitForLeader(), 20)

	c.Restart(victim.Index)
	_, hash := c.WaitConverged()
	if hash == "" {
		t.Fatal("empty state hash")
	}
}

// The whole cluster is shut down and started again with no join flags and no
// bootstrap: the nodes find each other from the peers they remembered, elect
// a leader and keep every acknowledged job.
func TestWholeClusterRestartsFromDataDirs(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	ids := submitMany(t, c.WaitForLeader(), 10)
	c.Eventually(clustertest.ConvergeTimeout, "peers remembered", func() error {
		for _, nd := range c.Nodes() {
			b, err := os.ReadFile(filepath.Join(nd.Dir, "cluster.json"))
			if err != nil {
				return err
			}
			if strings.Count(string(b), "127.0.0.1:") < 2 {
				return fmt.Errorf("%s remembers %s", nd.Name, b)
			}
		}
		return nil
	})
	for i := range c.Nodes() {
		c.Stop(i)
	}
	for i := range c.Nodes() {
		if err := c.StartNode(i); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	leader := c.WaitForLeader()
	ids = append(ids, submit(t, c.Followers()[0]))
	c.WaitConverged()
	for _, id := range ids {
		if err := hasJob(leader, id); err != nil {
			t.Fatal(err)
		}
	}
	c.Eventually(clustertest.ConvergeTimeout, "gossip sees all three", func() error {
		if n := len(leader.Members()); n != 3 {
			return fmt.Errorf("%d members", n)
		}
		return nil
	})
}

// A state file that is missing or corrupt while the node is stopped is
// rebuilt from the raft snapshot and log.
func TestStateFileRebuiltFromRaft(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(path string) error
	}{
		{"deleted", os.Remove},
		{"garbage", func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("not a bolt file ", 512)), 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clustertest.NewCluster(t, 3, clustertest.Options{SnapshotThreshold: 32})
			leader := c.WaitForLeader()
			victim := c.Followers()[0]
			submitMany(t, leader, 150)
			c.WaitConverged()
			c.Eventually(clustertest.ConvergeTimeout, "a snapshot on "+victim.Name, func() error {
				snaps, _ := os.ReadDir(filepath.Join(victim.Dir, "snapshots"))
				if len(snaps) == 0 {
					return errNotYet
				}
				return nil
			})
			c.Kill(victim.Index)
			if err := tc.spoil(filepath.Join(victim.Dir, "fsm.db")); err != nil {
				t.Fatal(err)
			}
			c.Restart(victim.Index)
			submit(t, victim)
			c.WaitConverged()
		})
	}
}

// A node of one cluster cannot join another: the join fails with a message
// naming both cluster IDs.
func TestJoinOfForeignClusterRefused(t *testing.T) {
	a := clustertest.NewCluster(t, 1, clustertest.Options{})
	b := clustertest.NewCluster(t, 1, clustertest.Options{})
	na, nb := a.WaitForLeader(), b.WaitForLeader()
	for _, nd := range []*clustertest.Node{na, nb} {
		a.Eventually(clustertest.ConvergeTimeout, nd.Name+" knows its cluster ID", func() error {
			if nd.ClusterID() == "" {
				return errNotYet
			}
			return nil
		})
	}
	err := nb.Join([]string{fmt.Sprintf("127.0.0.1:%d", na.Port)})
	if !errors.Is(err, cluster.ErrClusterMismatch) {
		t.Fatalf("join: %v, want ErrClusterMismatch", err)
	}
	want := fmt.Sprintf("refusing to join: this node belongs to cluster %s but the remote belongs to %s", nb.ClusterID(), na.ClusterID())
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("join error %q does not say %q", err, want)
	}
	if n := len(na.Members()); n != 1 {
		t.Fatalf("cluster A has %d members after the refused join", n)
	}
}

// submitMany submits n jobs concurrently through nd.
func submitMany(t testing.TB, nd *clustertest.Node, n int) []string {
	t.Helper()
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = trySubmit(nd)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return ids
}
