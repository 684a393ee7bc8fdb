package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
)

// A follower cut off from the others stops being "in contact with the
// leader" (its attempts' leases stop being renewed), is not Ready, and the
// leader stops hearing from it; after Heal everything resumes.
func TestPartitionedFollowerLosesLeaderContact(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	leader := c.WaitForLeader()
	f := c.Followers()[0]
	c.Eventually(clustertest.ConvergeTimeout, "follower in contact and ready", func() error {
		if !f.InContactWithLeader() {
			return errors.New("not in contact")
		}
		return f.Ready()
	})
	if _, ok := leader.LastHeardFrom(f.Name); !ok {
		t.Fatalf("leader has never heard from %s", f.Name)
	}

	others := []int{}
	for _, nd := range c.Nodes() {
		if nd.Index != f.Index {
			others = append(others, nd.Index)
		}
	}
	first := leader
	c.Partition(others, []int{f.Index})
	c.Eventually(clustertest.ConvergeTimeout, "follower out of contact", func() error {
		if f.InContactWithLeader() {
			return errors.New("still in contact")
		}
		if err := f.Ready(); !errors.Is(err, cluster.ErrNotReady) {
			return fmt.Errorf("Ready() = %v", err)
		}
		return nil
	})
	// The majority keeps (or, after a stall of the loaded test process longer
	// than the lease, re-elects) a leader that is in contact.
	c.Eventually(clustertest.LeaderTimeout, "a leader in contact on the majority side", func() error {
		for _, i := range others {
			if nd := c.Node(i); nd.IsLeader() && nd.InContactWithLeader() {
				leader = nd
				return nil
			}
		}
		return errNotYet
	})
	c.Eventually(clustertest.ConvergeTimeout, "leader stops hearing from "+f.Name, func() error {
		heard, ok := leader.LastHeardFrom(f.Name)
		if !ok && leader != first {
			return nil // a leader elected during the partition never heard from f
		}
		if !ok {
			return errors.New("LastHeardFrom unknown")
		}
		if age := time.Since(heard); age < 2*time.Second {
			return fmt.Errorf("heard %v ago", age)
		}
		return nil
	})
	submit(t, leader) // the majority still commits

	c.Heal()
	c.Eventually(clustertest.ConvergeTimeout, "follower back in contact", func() error {
		if !f.InContactWithLeader() {
			return errors.New("not in contact")
		}
		return f.Ready()
	})
	c.WaitConverged()
}

// A leader cut off from the majority loses contact (so its own attempts
// stop renewing), its leadership context is cancelled, and the majority
// elects a new leader whose registered functions start.
func TestIsolatedLeaderStepsDown(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	var mu sync.Mutex
	terms := map[string][]context.Context{}
	for _, nd := range c.Nodes() {
		nd.OnLeadership(func(ctx context.Context) {
			mu.Lock()
			terms[nd.Name] = append(terms[nd.Name], ctx)
			mu.Unlock()
			<-ctx.Done()
		})
	}
	old := c.WaitForLeader()
	c.Eventually(clustertest.LeaderTimeout, "leadership fn started on "+old.Name, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(terms[old.Name]) == 0 {
			return errNotYet
		}
		return nil
	})
	if old.LeaderSince().IsZero() {
		t.Fatal("LeaderSince is zero on the leader")
	}

	var rest []int
	for _, nd := range c.Nodes() {
		if nd.Index != old.Index {
			rest = append(rest, nd.Index)
		}
	}
	c.Partition(rest, []int{old.Index})
	c.Eventually(clustertest.ConvergeTimeout, "old leader out of contact and its context cancelled", func() error {
		if old.InContactWithLeader() {
			return errors.New("still in contact")
		}
		mu.Lock()
		defer mu.Unlock()
		if terms[old.Name][0].Err() == nil {
			return errors.New("leadership context still live")
		}
		return nil
	})
	var newLeader *clustertest.Node
	c.Eventually(clustertest.LeaderTimeout, "a new leader in the majority", func() error {
		for _, i := range rest {
			if c.Node(i).IsLeader() {
				newLeader = c.Node(i)
				return nil
			}
		}
		return errNotYet
	})
	c.Eventually(clustertest.LeaderTimeout, "leadership fn started on "+newLeader.Name, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(terms[newLeader.Name]) == 0 {
			return errNotYet
		}
		return nil
	})

	// A write through the isolated node cannot reach a leader.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := trySubmitCtx(ctx, old); err == nil {
		t.Fatal("a write through the isolated old leader succeeded")
	}

	c.Heal()
	c.WaitForLeader()
	c.WaitConverged()
}

// A follower is in sync only after it applied what the leader had when
// contact came back: cut off, it drops out of sync at once; restarted, it
// holds every job committed while it was down the moment it says in sync.
func TestFollowerInSyncOnlyAfterCatchUp(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	leader := c.WaitForLeader()
	f := c.Followers()[0]
	c.Eventually(clustertest.ConvergeTimeout, "all nodes in sync", func() error {
		for _, nd := range c.Live() {
			if !nd.InSync() {
				return fmt.Errorf("%s not in sync", nd.Name)
			}
		}
		return nil
	})

	others := []int{}
	for _, nd := range c.Nodes() {
		if nd.Index != f.Index {
			others = append(others, nd.Index)
		}
	}
	c.Partition(others, []int{f.Index})
	c.Eventually(clustertest.ConvergeTimeout, "cut-off follower out of sync", func() error {
		if f.InSync() {
			return errors.New("still in sync")
		}
		return nil
	})
	cut := submitMany(t, leader, 20)
	c.Heal()
	c.Eventually(clustertest.ConvergeTimeout, "healed follower in sync", func() error {
		if !f.InSync() {
			return errors.New("not in sync")
		}
		return nil
	})
	for _, id := range cut {
		if err := hasJob(f, id); err != nil {
			t.Fatalf("in sync after heal but %v", err)
		}
	}

	c.Stop(f.Index)
	down := submitMany(t, leader, 50)
	f = c.Restart(f.Index)
	c.Eventually(clustertest.ConvergeTimeout, "restarted follower in sync", func() error {
		if !f.InSync() {
			return errors.New("not in sync")
		}
		return nil
	})
	for _, id := range down {
		if err := hasJob(f, id); err != nil {
			t.Fatalf("in sync after restart but %v", err)
		}
	}
}
