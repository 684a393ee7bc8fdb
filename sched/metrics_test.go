package sched

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foreman-sched/foreman/fsm"
)

// fireLatenessNow reads foreman_schedule_fire_lateness_seconds' count
// and sum from the default registry (as GET /v1/metrics serves it).
func fireLatenessNow(t *testing.T) (uint64, float64) {
	t.Helper()
	RegisterMetrics()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "foreman_schedule_fire_lateness_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("foreman_schedule_fire_lateness_seconds is not registered")
	return 0, 0
}

// TestFireLateness: an on-time fire is observed as on time, and the
// catch-up fires of ticks missed while there was no leader as late by
// what they missed (the fake clock makes both exact).
func TestFireLateness(t *testing.T) {
	e := newLoopEnv(t)
	e.putSchedule(every10("all", fsm.CatchUpAll))
	count0, sum0 := fireLatenessNow(t)
	_, stop := e.start(loopConfig())
	e.clk.Advance(10 * time.Second)
	eventually(t, "the 12:00:10 tick fired", func() bool { return len(e.firedTicks()["all"]) == 1 })
	stop()
	if c, s := fireLatenessNow(t); c != count0+1 || s != sum0 {
		t.Fatalf("after an on-time fire: %d fires, %.3fs late in all; want %d, %.3fs", c, s, count0+1, sum0)
	}
	e.clk.Advance(37 * time.Second) // 12:00:47: the 20, 30 and 40 ticks are 27, 17 and 7 s late
	_, stop2 := e.start(loopConfig())
	defer stop2()
	eventually(t, "the catch-up fires", func() bool { return len(e.firedTicks()["all"]) == 4 })
	// The loop observes a fire after its Apply returns, which is after the
	// jobs are visible in the state: wait for the observations themselves.
	var c uint64
	var s float64
	eventually(t, "the catch-up fires observed", func() bool {
		c, s = fireLatenessNow(t)
		return c >= count0+4
	})
	if c != count0+4 || s-sum0 < 50.999 || s-sum0 > 51.001 {
		t.Fatalf("after the catch-up: %d more fires, %.3fs late in all; want 4, 51s", c-count0, s-sum0)
	}
}
