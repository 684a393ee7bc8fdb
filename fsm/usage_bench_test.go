package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkApplyFinishUsage is one job's submit, placement, start and
// finish applied one entry each, with accounting off and on: the
// difference is what accounting adds to an attempt's end.
func BenchmarkApplyFinishUsage(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("accounting=%v", on), func(b *testing.B) {
			h := newHarness(b)
			h.addNode("n1")
			if on {
				h.must(CmdStartUsage, StartUsage{Labels: []string{"team"}})
			}
			i := 0
			c0 := cpuTime()
			for b.Loop() {
				id := jobID(i)
				i++
				h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: id, SubmittedBy: fmt.Sprintf("user%d", i%20), Spec: JobSpec{
					Command: []string{"true"}, Namespace: fmt.Sprintf("ns%d", i%5), Labels: map[string]string{"team": "t"}}}}})
				h.runAttempt(id, time.Second, AttemptSucceeded, time.Second, 1<<20)
			}
			// CPU time is steadier than wall time on a shared machine.
			b.ReportMetric(float64((cpuTime()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkUsageRange reads a year of records, 20 keys an hour (hourly
// for 31 days, daily before), as GET /v1/usage?since=365d does.
func BenchmarkUsageRange(b *testing.B) {
	h := newHarness(b)
	h.must(CmdStartUsage, StartUsage{})
	now := t0
	tx, err := h.f.db.Begin(true)
	if err != nil {
		b.Fatal(err)
	}
	bk, err := tx.CreateBucketIfNotExists(bucketUsage)
	if err != nil {
		b.Fatal(err)
	}
	u := Usage{Attempts: 3, WallMs: 5000, CPUUsedMs: 4000, CPUReqMs: 5000, MemReqMiBMs: 1 << 20, MemUsedMiBMs: 1 << 19, PeakMemoryB: 1 << 30}
	v, _ := encode(&u)
	records := 0
	put := func(start time.Time) {
		for k := range 20 {
			if err := bk.Put(usageKey(start, fmt.Sprintf("ns%d", k%5), fmt.Sprintf("user%d", k), ""), v); err != nil {
				b.Fatal(err)
			}
			records++
		}
	}
	for d := 365; d > 31; d-- {
		put(now.Add(-time.Duration(d) * 24 * time.Hour).Truncate(24 * time.Hour))
	}
	for hr := 31 * 24; hr > 0; hr-- {
		put(now.Add(-time.Duration(hr) * time.Hour).Truncate(time.Hour))
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(records), "records")
	for b.Loop() {
		sums := map[string]*Usage{}
		if err := h.f.View(func(tx *Tx) error {
			return tx.UsageRange(now.Add(-UsageRetention), now, func(_ time.Time, ns, _, _ string, u *Usage) error {
				s := sums[ns]
				if s == nil {
					s = &Usage{}
					sums[ns] = s
				}
				s.Add(u)
				return nil
			})
		}); err != nil {
			b.Fatal(err)
		}
		if len(sums) != 5 {
			b.Fatalf("%d namespaces", len(sums))
		}
	}
}

// BenchmarkApplyFinishUsageBatch is the hot path's shape: 100 attempts'
// finishes applied as one batch (one transaction), accounting off and
// on; only the batch is timed (wall and CPU).
func BenchmarkApplyFinishUsageBatch(b *testing.B) {
	const per = 100
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("accounting=%v", on), func(b *testing.B) {
			h := newHarness(b)
			h.addNode("n1")
			if on {
				h.must(CmdStartUsage, StartUsage{Labels: []string{"team"}})
			}
			var cpu time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				jobs := make([]NewJob, per)
				places := make([]Placement, per)
				for k := range jobs {
					id := jobID(i)
					i++
					jobs[k] = NewJob{ID: id, SubmittedBy: fmt.Sprintf("user%d", i%20), Spec: JobSpec{
						Command: []string{"true"}, Namespace: fmt.Sprintf("ns%d", i%5), Labels: map[string]string{"team": "t"}}}
					places[k] = Placement{JobID: id, Node: "n1", Resources: Resources{CPU: 10, MemoryMB: 10}}
				}
				h.must(CmdSubmitJobs, SubmitJobs{Jobs: jobs})
				res := h.must(CmdPlace, Place{Placements: places})
				if len(res.Skipped) > 0 {
					b.Fatalf("place: skipped %v", res.Skipped)
				}
				start := h.now
				for _, j := range jobs {
					h.must(CmdReport, ReportAttempt{JobID: j.ID, Attempt: 1, FencingToken: res.Index, Node: "n1", State: AttemptRunning, StartedAt: start})
				}
				h.now = h.now.Add(time.Second)
				logs := make([]*raft.Log, per)
				for k, j := range jobs {
					logs[k] = h.entry(CmdReport, ReportAttempt{JobID: j.ID, Attempt: 1, FencingToken: res.Index, Node: "n1", State: AttemptSucceeded,
						ExitCode: intp(0), StartedAt: start, FinishedAt: h.now, CPUTimeNs: 1e9, PeakMemoryB: 1 << 20})
				}
				c0 := cpuTime()
				b.StartTimer()
				out := h.f.ApplyBatch(logs)
				b.StopTimer()
				cpu += cpuTime() - c0
				for _, o := range out {
					if r := o.(*Result); r.Err != nil {
						b.Fatalf("finish: %v", r.Err)
					}
				}
				b.StartTimer() // b.Loop must be called with the timer running
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*per), "µs/finish")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*per), "cpu-µs/finish")
		})
	}
}
