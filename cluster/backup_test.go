package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

// saveSnapshot takes a backup through the leader and returns the file.
func saveSnapshot(t *testing.T, c *clustertest.Cluster) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	b, err := c.WaitForLeader().SaveSnapshot(ctx)
	if err != nil {
		t.Fatalf("save snapshot: %v", err)
	}
	defer b.Close()
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	if int64(buf.Len()) != b.Size() {
		t.Fatalf("wrote %d bytes, Size says %d", buf.Len(), b.Size())
	}
	return buf.Bytes()
}

func restore(c *clustertest.Cluster, file []byte, force bool) (*cluster.RestoreResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*applyTimeout)
	defer cancel()
	return c.WaitForLeader().RestoreSnapshot(ctx, bytes.NewReader(file), cluster.RestoreOptions{Force: force})
}

func jobsOf(nd *clustertest.Node) (map[string]bool, error) {
	out := map[string]bool{}
	err := nd.FSM.View(func(tx *fsm.Tx) error {
		cursor := ""
		for {
			jobs, next, err := tx.ListJobs(fsm.JobQuery{Cursor: cursor})
			if err != nil {
				return err
			}
			for _, j := range jobs {
				out[j.ID] = true
			}
			if next == "" {
				return nil
			}
			cursor = next
		}
	})
	return out, err
}

func clusterIDOf(nd *clustertest.Node) string {
	var id string
	_ = nd.FSM.View(func(tx *fsm.Tx) error { id = tx.ClusterID(); return nil })
	return id
}

// A busy cluster's snapshot restored into a fresh cluster with other node
// names: every job is there on every node, the new cluster keeps its ID,
// the old nodes are dead (so their attempts will be declared lost), the
// new nodes are recorded, and fencing tokens keep growing.
func TestSnapshotRestoreIntoFreshCluster(t *testing.T) {
	a := clustertest.NewCluster(t, 3, clustertest.Options{NamePrefix: "a"})
	la := a.WaitForLeader()
	var ids []string
	for range 20 {
		ids = append(ids, submit(t, la))
	}
	a.Eventually(clustertest.ConvergeTimeout, "a0 recorded", func() error { _, err := nodeRecord(la, "a0"); return err })
	placed := apply(t, la, fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: ids[0], Node: "a0"}, {JobID: ids[1], Node: "a1"}}})
	if len(placed.Skipped) > 0 {
		t.Fatalf("placements skipped: %v", placed.Skipped)
	}
	file := saveSnapshot(t, a)

	hdr, err := fsm.ReadBackup(bytes.NewReader(file), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if hdr.Counts.Jobs != 20 || hdr.Counts.LiveAttempts != 2 || hdr.Index < placed.Index || hdr.Node != la.Name {
		t.Fatalf("header = %+v", hdr)
	}

	b := clustertest.NewCluster(t, 3, clustertest.Options{NamePrefix: "b"})
	lb := b.WaitForLeader()
	bID := clusterIDOf(lb)
	res, err := restore(b, file, false)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !slices.Equal(res.DeadNodes, []string{"a0", "a1", "a2"}) || res.Index <= hdr.Index || res.Replaced.Jobs != 0 {
		t.Fatalf("restore result = %+v", res)
	}
	b.WaitConverged()
	for _, nd := range b.Live() {
		got, err := jobsOf(nd)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if !got[id] {
				t.Fatalf("%s lacks job %s after the restore", nd.Name, id)
			}
		}
		if id := clusterIDOf(nd); id != bID {
			t.Fatalf("%s: cluster ID %s, want the restored-into cluster's %s", nd.Name, id, bID)
		}
	}
	lb = b.WaitForLeader()
	for _, old := range []string{"a0", "a1", "a2"} {
		rec, err := nodeRecord(lb, old)
		if err != nil || rec.Gossip != fsm.NodeDead {
			t.Fatalf("old node %s: %+v, %v (want dead)", old, rec, err)
		}
	}
	b.Eventually(clustertest.ConvergeTimeout, "b nodes recorded in the restored state", func() error {
		for _, nd := range b.Nodes() {
			rec, err := nodeRecord(lb, nd.Name)
			if err != nil {
				return err
			}
			if rec.Gossip != fsm.NodeAlive {
				return fmt.Errorf("%s is %s", nd.Name, rec.Gossip)
			}
		}
		return nil
	})
	// A new attempt's fencing token is above every token of the image.
	p := apply(t, lb, fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: ids[5], Node: "b1"}}})
	if len(p.Skipped) > 0 || p.Index <= hdr.Index {
		t.Fatalf("placement after restore: index %d (snapshot %d), skipped %v", p.Index, hdr.Index, p.Skipped)
	}
	// The restored state survives a restart (rebuilt from the installed
	// snapshot where the state file is behind it).
	f := b.Followers()[0]
	b.Restart(f.Index)
	b.WaitConverged()
	if err := hasJob(f, ids[19]); err != nil {
		t.Fatal(err)
	}
}

// A corrupt or truncated file, or a restore into a cluster that holds
// jobs without force, changes nothing; force replaces the jobs and says
// how many.
func TestSnapshotRestoreRefusals(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	l := c.WaitForLeader()
	old := submit(t, l)
	file := saveSnapshot(t, c)
	later := submit(t, l)
	_, before := c.WaitConverged()

	corrupt := slices.Clone(file)
	corrupt[len(corrupt)/2] ^= 0xFF
	for name, tc := range map[string]struct {
		file []byte
		want error
	}{
		"corrupt":   {corrupt, fsm.ErrBadBackup},
		"truncated": {file[:len(file)-100], fsm.ErrBadBackup},
		"not empty": {file, cluster.ErrNotEmpty},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := restore(c, tc.file, false); !errors.Is(err, tc.want) {
				t.Fatalf("restore: %v, want %v", err, tc.want)
			}
			if _, after := c.WaitConverged(); after != before {
				t.Fatalf("state changed by a refused restore")
			}
		})
	}

	res, err := restore(c, file, true)
	if err != nil {
		t.Fatalf("forced restore: %v", err)
	}
	if res.Replaced.Jobs != 2 {
		t.Fatalf("replaced %+v, want 2 jobs", res.Replaced)
	}
	c.WaitConverged()
	for _, nd := range c.Live() {
		if err := hasJob(nd, old); err != nil {
			t.Fatal(err)
		}
		if err := hasJob(nd, later); !errors.Is(err, fsm.ErrNotFound) {
			t.Fatalf("%s: job submitted after the snapshot: %v, want not found", nd.Name, err)
		}
	}
}

// Submits racing a forced restore: each acknowledged submit is either in
// the restored state (applied after it) or was acknowledged before the
// restore returned (replaced, and counted in Replaced); every submit
// acknowledged after the restore returned is there, on every node.
func TestSnapshotRestoreWhileSubmitting(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	l := c.WaitForLeader()
	snapJob := submit(t, l)
	file := saveSnapshot(t, c)

	type ack struct {
		id string
		at time.Time
	}
	var mu sync.Mutex
	var acks []ack
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, nd := range c.Live() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if id, err := trySubmit(nd); err == nil {
					mu.Lock()
					acks = append(acks, ack{id, time.Now()})
					mu.Unlock()
				}
			}
		}()
	}
	clustertest.Eventually(t, applyTimeout, "submits flowing", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acks) < 10 {
			return errNotYet
		}
		return nil
	})
	// Without force the restore is refused: the submits made the state
	// non-empty, and nothing they wrote is touched.
	if _, err := restore(c, file, false); !errors.Is(err, cluster.ErrNotEmpty) {
		close(stop)
		wg.Wait()
		t.Fatalf("restore without force over submits: %v, want ErrNotEmpty", err)
	}
	res, err := restore(c, file, true)
	done := time.Now()
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("restore: %v", err)
	}
	clustertest.Eventually(t, applyTimeout, "submits after the restore", func() error {
		mu.Lock()
		defer mu.Unlock()
		if acks[len(acks)-1].at.Before(done.Add(200 * time.Millisecond)) {
			return errNotYet
		}
		return nil
	})
	close(stop)
	wg.Wait()
	c.WaitConverged()

	got, err := jobsOf(c.WaitForLeader())
	if err != nil {
		t.Fatal(err)
	}
	if !got[snapJob] {
		t.Fatalf("the snapshot's job is missing")
	}
	kept, replaced := 0, 0
	for _, a := range acks {
		switch {
		case got[a.id]:
			kept++
		case a.at.After(done):
			t.Fatalf("job %s acknowledged after the restore returned is missing", a.id)
		default:
			replaced++
		}
	}
	if len(got) != 1+kept {
		t.Fatalf("state holds %d jobs, want the snapshot's 1 + %d acknowledged after", len(got), kept)
	}
	if replaced > res.Replaced.Jobs-1 || kept == 0 {
		t.Fatalf("%d acknowledged jobs replaced, restore reported %d replaced (with the snapshot's); %d kept", replaced, res.Replaced.Jobs, kept)
	}
	t.Logf("%d submits acknowledged: %d replaced by the restore, %d applied after it", len(acks), replaced, kept)
}
