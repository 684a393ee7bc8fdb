package fsm

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkFireSchedules applies one entry of 1,000 fires (one per
// schedule, each creating a job), as a burst of simultaneous ticks does.
func BenchmarkFireSchedules(b *testing.B) {
	h := newHarness(b)
	const n = 1000
	for i := range n {
		h.must(CmdPutSchedule, PutSchedule{Schedule: testScheduleSpec(fmt.Sprintf("s%04d", i)), Create: true})
	}
	b.ResetTimer()
	for it := range b.N {
		tick := t0.Add(time.Duration(it+1) * 10 * time.Second)
		h.now = tick
		var p FireSchedules
		for i := range n {
			p.Fires = append(p.Fires, Fire{Schedule: fmt.Sprintf("s%04d", i), Tick: tick, JobID: fmt.Sprintf("J%08d-%04d", it, i)})
		}
		if r := h.must(CmdFireSchedules, p); len(r.Skipped) > 0 {
			b.Fatalf("skipped %v", r.Skipped)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/fire")
}
