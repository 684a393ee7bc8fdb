package fsm

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	bolt "go.etcd.io/bbolt"
)

// fsmMetrics are latencies derived from applied events, registered with
// the default registry (GET /v1/metrics serves it). Every node applies the
// same log, so each reports the cluster's latencies as its replica saw
// them; the times are the leader's stamps, not this node's clock.
type fsmMetrics struct {
	placeLatency, startLatency prometheus.Histogram
	// commits and writtenBytes are this node's state-file commits of
	// applied entries (ApplyBatch), and what bbolt wrote for them.
	commits, writtenBytes prometheus.Counter
	// The usage counters (usage.go), by namespace: what ended attempts
	// added to accounting as this node applied them.
	usageAttempts, usageCPU, usageCPUReq, usageMem, usageMemReq, usageGPU, usageWall *prometheus.CounterVec
}

// metrics registers them on first use, not at package init: every start
// of the binary (CLI, supervisor, container init) runs the init of every
// package in it.
var metrics = sync.OnceValue(func() *fsmMetrics {
	return &fsmMetrics{
		placeLatency: promauto.NewHistogram(prometheus.HistogramOpts{
			Name:    "foreman_job_place_latency_seconds",
			Help:    "Time from a job's submit to its first placement (leader-stamped times; a run_at delay counts).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		startLatency: promauto.NewHistogram(prometheus.HistogramOpts{
			Name:    "foreman_attempt_start_latency_seconds",
			Help:    "Time from an attempt's placement to its node reporting it started.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		commits: promauto.NewCounter(prometheus.CounterOpts{
			Name: "foreman_state_commits_total",
			Help: "Write transactions of this node's state file that applied committed raft entries (one per applied batch).",
		}),
		writtenBytes: promauto.NewCounter(prometheus.CounterOpts{
			Name: "foreman_state_written_bytes_total",
			Help: "Bytes bbolt wrote to the state file for those commits: the pages each allocated (bbolt's TxStats.PageAlloc: changed B+tree pages and the freelist) plus its meta page.",
		}),
		usageAttempts: usageCounter("foreman_usage_attempts_total", "Attempts that ended and were accounted (usage accounting on), as this node applied them."),
		usageCPU:      usageCounter("foreman_usage_cpu_seconds_total", "CPU seconds the nodes measured for attempts that ended."),
		usageCPUReq:   usageCounter("foreman_usage_cpu_requested_seconds_total", "Requested cores × wall seconds of attempts that ended."),
		usageMem:      usageCounter("foreman_usage_memory_gib_seconds_total", "Peak memory GiB × wall seconds of attempts that ended (an upper bound of memory-time)."),
		usageMemReq:   usageCounter("foreman_usage_memory_requested_gib_seconds_total", "Requested memory GiB × wall seconds of attempts that ended."),
		usageGPU:      usageCounter("foreman_usage_gpu_seconds_total", "Whole GPUs × wall seconds of attempts that ended."),
		usageWall:     usageCounter("foreman_usage_wall_seconds_total", "Wall seconds of attempts that ended."),
	}
})

// RegisterMetrics registers this package's metrics with the default
// registry now (the agent does at start, so a scrape lists them before
// their first observation). Later calls do nothing.
func RegisterMetrics() { metrics() }

// observeCommit counts one committed apply transaction, from its stats
// read after Commit: every page a commit allocates is written once, then
// one meta page.
func observeCommit(st bolt.TxStats, pageSize int) {
	m := metrics()
	m.commits.Inc()
	m.writtenBytes.Add(float64(st.GetPageAlloc() + int64(pageSize)))
}

// observeEvents feeds the histograms after a commit (never inside Apply).
func observeEvents(events []Event) {
	m := metrics()
	for i := range events {
		e := &events[i]
		if e.use != nil {
			observeUsage(m, NamespaceOf(e.Namespace), e.use)
		}
		if e.wait <= 0 || e.Type != EventAttempt {
			continue
		}
		switch e.Name {
		case NamePlaced:
			m.placeLatency.Observe(e.wait.Seconds())
		case NameStarted:
			m.startLatency.Observe(e.wait.Seconds())
		}
	}
}

func usageCounter(name, help string) *prometheus.CounterVec {
	return promauto.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"namespace"})
}

// observeUsage adds one ended attempt's use to the usage counters.
func observeUsage(m *fsmMetrics, ns string, u *Usage) {
	const ms, mibMsPerGiBs = 1e3, 1024 * 1e3
	m.usageAttempts.WithLabelValues(ns).Add(float64(u.Attempts))
	m.usageCPU.WithLabelValues(ns).Add(float64(u.CPUUsedMs) / ms)
	m.usageCPUReq.WithLabelValues(ns).Add(float64(u.CPUReqMs) / ms)
	m.usageMem.WithLabelValues(ns).Add(float64(u.MemUsedMiBMs) / mibMsPerGiBs)
	m.usageMemReq.WithLabelValues(ns).Add(float64(u.MemReqMiBMs) / mibMsPerGiBs)
	m.usageGPU.WithLabelValues(ns).Add(float64(u.GPUMs) / ms)
	m.usageWall.WithLabelValues(ns).Add(float64(u.WallMs) / ms)
}
