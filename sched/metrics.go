package sched

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/foreman-sched/foreman/fsm"
)

// schedMetrics are registered with the default registry (GET
// /v1/metrics). The scheduler's queue depth is foreman_jobs{state="queued"},
// read from the state at scrape time: counting it per plan would cost a
// scan per plan.
type schedMetrics struct {
	planSeconds prometheus.Histogram
	planPlaced  prometheus.Counter
	planBlocked prometheus.Gauge
	// fireLateness: a fire is late by the leader's cron loop waking, the
	// fire command's commit, and (a catch-up fire) the leader's absence.
	fireLateness prometheus.Histogram
}

// metrics registers them on first use, not at package init: every start
// of the binary (CLI, supervisor, container init) runs the init of every
// package in it.
var metrics = sync.OnceValue(func() *schedMetrics {
	return &schedMetrics{
		planSeconds: promauto.NewHistogram(prometheus.HistogramOpts{
			Name:    "foreman_scheduler_plan_duration_seconds",
			Help:    "Time the leader spends loading a snapshot and planning (applies not included).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		planPlaced: promauto.NewCounter(prometheus.CounterOpts{
			Name: "foreman_scheduler_placements_total",
			Help: "Placements the leader's plans emitted.",
		}),
		planBlocked: promauto.NewGauge(prometheus.GaugeOpts{
			Name: "foreman_scheduler_unplaced",
			Help: "Runnable jobs (or blocked placement groups) the last plan left queued.",
		}),
		fireLateness: promauto.NewHistogram(prometheus.HistogramOpts{
			Name:    "foreman_schedule_fire_lateness_seconds",
			Help:    "Time from a schedule's tick to its fire committed by the leader (catch-up fires of missed ticks included; skipped ticks not).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}),
	}
})

// RegisterMetrics registers this package's metrics with the default
// registry now (the agent does at start: a follower, which never plans,
// still lists them). Later calls do nothing.
func RegisterMetrics() { metrics() }

// observeFires records the lateness of committed fires (skips are not
// runs).
func observeFires(fires []fsm.Fire, committed time.Time) {
	m := metrics()
	for i := range fires {
		if fires[i].Skip == "" {
			m.fireLateness.Observe(committed.Sub(fires[i].Tick).Seconds())
		}
	}
}
