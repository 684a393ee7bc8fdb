package cluster_test

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

// BenchmarkApplyThreeNodes measures concurrent single-job submits into a
// three-node cluster with fsync on (raft log and state file), half through
// the leader and half forwarded by a follower. It reports jobs/s and the
// p50/p99 latency of one submit.
func BenchmarkApplyThreeNodes(b *testing.B) {
	for _, bc := range []struct {
		name    string
		through string // leader or follower
	}{{"leader", "leader"}, {"follower", "follower"}} {
		b.Run(bc.name, func(b *testing.B) {
			c := clustertest.NewCluster(b, 3, clustertest.Options{Sync: true, SnapshotThreshold: 1 << 20})
			nd := c.WaitForLeader()
			if bc.through == "follower" {
				nd = c.Followers()[0]
			}
			const workers = 64
			lat := make([]time.Duration, 0, b.N)
			var mu sync.Mutex
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					local := make([]time.Duration, 0, b.N/workers+1)
					for next.Add(1) <= int64(b.N) {
						cmd, _ := fsm.NewCommand(fsm.CmdSubmitJobs, time.Now(), fsm.SubmitJobs{Jobs: []fsm.NewJob{{
							ID: ulid.Make().String(), Spec: fsm.JobSpec{Command: []string{"true"}},
						}}})
						t0 := time.Now()
						if _, err := nd.Apply(context.Background(), cmd); err != nil {
							b.Error(err)
							return
						}
						local = append(local, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if len(lat) == 0 {
				return
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "jobs/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
