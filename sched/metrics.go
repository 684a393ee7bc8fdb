package sched

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
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
)
