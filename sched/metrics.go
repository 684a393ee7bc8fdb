package sched

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/foreman-sched/foreman/fsm"
)

// Registered with the default registry (GET /v1/metrics). The scheduler's
// queue depth is foreman_jobs{state="queued"}, read from the state at
// scrape time: counting it per plan would cost a scan per plan.
var (
	planSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "foreman_scheduler_plan_duration_seconds",
		Help:    "Time the leader spends loading a snapshot and planning (applies not included).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	planPlaced = promauto.NewCounter(prometheus.CounterOpts{
		Name: "foreman_scheduler_placements_total",
		Help: "Placements the leader's plans emitted.",
	})
	planBlocked = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "foreman_scheduler_unplaced",
		Help: "Runnable jobs (or blocked placement groups) the last plan left queued.",
	})
	// fireLateness: a fire is late by the leader's cron loop waking, the
	// fire command's commit, and (a catch-up fire) the leader's absence.
	fireLateness = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "foreman_schedule_fire_lateness_seconds",
		Help:    "Time from a schedule's tick to its fire committed by the leader (catch-up fires of missed ticks included; skipped ticks not).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
	})
)

// observeFires records the lateness of committed fires (skips are not
// runs).
func observeFires(fires []fsm.Fire, committed time.Time) {
	for i := range fires {
		if fires[i].Skip == "" {
			fireLateness.Observe(committed.Sub(fires[i].Tick).Seconds())
		}
	}
}
