package cluster

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// clusterMetrics are registered with the default registry, which
// GET /v1/metrics serves (the raft gauges come from RaftInfo at scrape).
type clusterMetrics struct {
	commitSeconds prometheus.Histogram
	// clientsSilentHeld is how many silent clients' deaths the
	// mass-silence guard holds back now (clientlive.go).
	clientsSilentHeld prometheus.Gauge
	// workStreamsOpen is how many work streams this process's server
	// holds open (workconn.go); workStreamWriteFailures counts the streams
	// a failed or slow write ended; workStreamMoves the streams this
	// server handed to a less loaded server (clientspread.go).
	workStreamsOpen                          prometheus.Gauge
	workStreamWriteFailures, workStreamMoves prometheus.Counter
	raftLog                                  raftLog
}

// raftLog counts what this node appends to its raft log (raftBolt.StoreLogs,
// below the log cache): one append is one bbolt commit of raft.db (two
// fsyncs unless sync is off), however many entries it carries.
type raftLog struct {
	appends, entries, bytes prometheus.Counter
}

// metrics registers them on first use, not at package init: every start
// of the binary (CLI, supervisor, container init) runs the init of every
// package in it.
var metrics = sync.OnceValue(func() *clusterMetrics {
	return &clusterMetrics{
		commitSeconds: promauto.NewHistogram(prometheus.HistogramOpts{
			Name:    "foreman_raft_commit_seconds",
			Help:    "Time from raft.Apply on the leader to the entry committed and applied there.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		clientsSilentHeld: newGauge("foreman_clients_silent_held",
			"Silent clients the leader does not declare dead because too many fell silent at once (the mass-silence guard)."),
		workStreamsOpen: newGauge("foreman_work_streams",
			"Client work streams this server holds open."),
		workStreamWriteFailures: newCounter("foreman_work_stream_write_failures_total",
			"Client work streams ended because a frame could not be made or written, or its write waited 2 s for the client to read (the client reconnects)."),
		workStreamMoves: newCounter("foreman_work_stream_moves_total",
			"Client work streams this server handed to a less loaded server (a move frame naming it, then the stream ends; the client opens its next stream there)."),
		raftLog: raftLog{
			appends: newCounter("foreman_raft_log_appends_total",
				"Appends to this node's raft log: each is one bbolt commit of raft.db (two fsyncs unless sync is off)."),
			entries: newCounter("foreman_raft_log_entries_total",
				"Entries appended to this node's raft log."),
			bytes: newCounter("foreman_raft_log_bytes_total",
				"Data bytes of the entries appended to this node's raft log (the commands, without raft's framing)."),
		},
	}
})

// newCounter and newGauge register a metric without labels.
func newCounter(name, help string) prometheus.Counter {
	return promauto.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func newGauge(name, help string) prometheus.Gauge {
	return promauto.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// RegisterMetrics registers this package's metrics with the default
// registry now (the agent does at start, so a scrape lists them before
// their first observation). Later calls do nothing.
func RegisterMetrics() { metrics() }
