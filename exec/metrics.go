package exec

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// startSeconds is registered with the default registry (GET /v1/metrics).
// The driver runs in the supervisor process, so the agent times the start
// from its side: from taking the attempt off the start queue to the
// supervisor's "started" (prepare, fork, driver start: container set-up
// or exec).
var startSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "foreman_attempt_start_duration_seconds",
	Help:    "Time from a node's worker dequeuing an attempt to its driver reporting the job started, by driver.",
	Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
}, []string{"driver"})
