package cluster

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// commitSeconds is registered with the default registry, which
// GET /v1/metrics serves (the raft gauges come from RaftInfo at scrape).
var commitSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
	Name:    "foreman_raft_commit_seconds",
	Help:    "Time from raft.Apply on the leader to the entry committed and applied there.",
	Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
})
