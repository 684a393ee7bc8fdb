package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

// Large entries compact the log by size: the count triggers are set far out
// of reach (a million entries, an hour), so only the size trigger can take
// the snapshot, and only its lowered TrailingLogs can drop entries (10,240
// trailing would keep all of them).
func TestLogCompactedBySize(t *testing.T) {
	// Each entry is 16 KiB, so the 64-entry floor of TrailingLogs is all that
	// stays after a snapshot; the state (and so the size trigger, which
	// waits for as many bytes as the last snapshot had) grows with every
	// entry, so the test submits until it sees a compacted log.
	const maxEntries, argBytes = 2000, 16 << 10
	c := clustertest.NewCluster(t, 1, clustertest.Options{
		SnapshotThreshold: 1 << 20,
		Configure: func(_ int, cfg *cluster.Config) {
			cfg.Raft.SnapshotInterval = time.Hour
			cfg.Raft.TrailingLogs = 10240
			cfg.Raft.SnapshotLogBytes = 64 << 10
		},
	})
	nd := c.WaitForLeader()
	arg := strings.Repeat("x", argBytes)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var info cluster.RaftInfo
	compacted := func() bool {
		info = nd.RaftInfo()
		return info.SnapshotIndex > 0 && info.FirstIndex > 1
	}
	for i := 0; !compacted(); i++ {
		if i == maxEntries {
			// The trigger looks once a second, and a fast machine submits
			// all of these in less: the log is past every threshold now,
			// so the next looks must compact it.
			deadline := time.Now().Add(10 * time.Second)
			for !compacted() && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if !compacted() {
				t.Fatalf("after %d entries of %d bytes and 10 s: snapshot index %d, log %d..%d", i, argBytes, info.SnapshotIndex, info.FirstIndex, info.LastIndex)
			}
			break
		}
		cmd, err := fsm.NewCommand(fsm.CmdSubmitJobs, time.Now(), fsm.SubmitJobs{Jobs: []fsm.NewJob{{
			ID: ulid.Make().String(), Spec: fsm.JobSpec{Command: []string{"true", arg}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nd.Apply(ctx, cmd); err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
}
