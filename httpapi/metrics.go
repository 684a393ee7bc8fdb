package httpapi

import (
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/foreman-sched/foreman/fsm"
)

// GET /v1/metrics serves three registries: the process-wide default one
// (Go runtime and process collectors, and the histograms other packages
// observe where they measure: fsm's latencies, cluster's commit time,
// sched's plans, exec's container starts), this server's own, which
// reads the replicated state, raft and the event counts at scrape time
// and counts the HTTP requests this node served, and the per-node series
// (nodeCollector).

// metrics is one server's registries.
type metrics struct {
	s        *server
	reg      *prometheus.Registry
	nodes    *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// sources, cheapest first: a scrape that names its families stops
	// gathering once it has them all.
	sources prometheus.Gatherers
	handler http.Handler
}

func newMetrics(s *server) *metrics {
	m := &metrics{s: s, reg: prometheus.NewRegistry(), nodes: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "foreman_http_requests_total",
		Help: "HTTP requests this node served, by route pattern, method and status code.",
	}, []string{"route", "method", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "foreman_http_request_duration_seconds",
		Help:    "Time to serve an HTTP request (event streams: their whole life), by route pattern.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"route"})
	m.reg.MustRegister(m.requests, m.duration, stateCollector{s})
	m.nodes.MustRegister(nodeCollector{s})
	m.sources = prometheus.Gatherers{prometheus.DefaultGatherer, m.reg, m.nodes}
	m.handler = promhttp.HandlerFor(m.sources, metricsOpts)
	return m
}

var metricsOpts = promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}

// metricName is the classic Prometheus metric name syntax.
var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// serve writes every family, or with ?name= (repeatable) only the
// families named. A named scrape gathers its sources in turn and stops
// once it has every name, so one that needs no per-node series does not
// build them: with 5,000 nodes they are ~25,000 series and most of a
// whole scrape's ~0.1 s of CPU, which a monitor reading only the
// process's CPU (foreman bench) would otherwise count as the server's
// own idle cost. A name that matches no family gives no family, as in
// Prometheus's federation.
func (m *metrics) serve(w http.ResponseWriter, r *http.Request) {
	names := r.URL.Query()["name"]
	if len(names) == 0 {
		m.handler.ServeHTTP(w, r)
		return
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		if !metricName.MatchString(n) {
			m.s.writeError(w, r, invalid("name", "must be a Prometheus metric name (got %q)", n))
			return
		}
		want[n] = true
	}
	promhttp.HandlerFor(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return gatherNamed(m.sources, want)
	}), metricsOpts).ServeHTTP(w, r)
}

// gatherNamed gathers sources in turn until it has a family for every
// name in want, and returns those families.
func gatherNamed(sources prometheus.Gatherers, want map[string]bool) ([]*dto.MetricFamily, error) {
	var out []*dto.MetricFamily
	var errs prometheus.MultiError
	for _, g := range sources {
		if len(out) == len(want) {
			break
		}
		mfs, err := g.Gather()
		errs.Append(err)
		for _, mf := range mfs {
			if want[mf.GetName()] {
				out = append(out, mf)
			}
		}
	}
	return out, errs.MaybeUnwrap()
}

// observe records one served request.
func (m *metrics) observe(r *http.Request, status int, d time.Duration) {
	route := r.Pattern
	if route == "" || route == "/" {
		route = "other" // unmatched paths must not grow the label set
	} else if _, p, ok := strings.Cut(route, " "); ok {
		route = p
	}
	m.requests.WithLabelValues(route, r.Method, statusText(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

func statusText(code int) string {
	const digits = "0123456789"
	if code < 100 || code > 999 {
		return "other"
	}
	return string([]byte{digits[code/100], digits[code/10%10], digits[code%10]})
}

var (
	descJobs          = prometheus.NewDesc("foreman_jobs", "Jobs in each state, from this node's replica.", []string{"state"}, nil)
	descQueueJobs     = prometheus.NewDesc("foreman_queue_jobs", "Active (non-terminal) jobs per queue and state.", []string{"queue", "state"}, nil)
	descEvents        = prometheus.NewDesc("foreman_events_total", "Events this node applied since it started, by type.", []string{"type"}, nil)
	descAttempts      = prometheus.NewDesc("foreman_attempts_total", "Attempts that ended, by namespace and outcome, as applied on this node since it started.", []string{"namespace", "outcome"}, nil)
	descSubmitted     = prometheus.NewDesc("foreman_jobs_submitted_total", "Jobs submitted (cluster-wide) by namespace, as applied on this node since it started.", []string{"namespace"}, nil)
	descNSJobs        = prometheus.NewDesc("foreman_namespace_jobs", "Active (non-terminal) jobs per namespace and state.", []string{"namespace", "state"}, nil)
	descLeaderChanges = prometheus.NewDesc("foreman_raft_leader_changes_total", "Leader changes applied on this node since it started.", nil, nil)
	descSubscribers   = prometheus.NewDesc("foreman_event_subscribers", "Open GET /v1/events streams on this node.", nil, nil)
	descStreamWakeups = prometheus.NewDesc("foreman_event_stream_wakeups_total", "Times this node woke its open event streams (coalesced: at most one per min(streams x 1 ms, 100 ms) under load).", nil, nil)
	descRaftState     = prometheus.NewDesc("foreman_raft_state", "1 for this node's current raft state.", []string{"state"}, nil)
	descRaftTerm      = prometheus.NewDesc("foreman_raft_term", "Current raft term.", nil, nil)
	descRaftCommit    = prometheus.NewDesc("foreman_raft_commit_index", "Raft commit index.", nil, nil)
	descRaftApplied   = prometheus.NewDesc("foreman_raft_applied_index", "Index of the last entry applied to this node's state.", nil, nil)
	descRaftLast      = prometheus.NewDesc("foreman_raft_last_index", "Index of the last entry in this node's raft log.", nil, nil)
	descNodeCapacity  = prometheus.NewDesc("foreman_node_capacity", "A node's advertised capacity (cpu in millicores, memory in MiB, named resources as counts).", []string{"node", "resource"}, nil)
	descNodeAlloc     = prometheus.NewDesc("foreman_node_allocated", "Resources held by live attempts on a node (same units as foreman_node_capacity).", []string{"node", "resource"}, nil)
	descNodeUp        = prometheus.NewDesc("foreman_node_alive", "1 when the node's committed gossip state is alive.", []string{"node"}, nil)
	descGPUHealthy    = prometheus.NewDesc("foreman_gpu_healthy", "1 for each GPU a node detected that the leader may place on, 0 for an unhealthy one.", []string{"node", "index", "uuid", "model"}, nil)
)

var raftStates = []string{"Leader", "Follower", "Candidate", "Shutdown"}

// stateCollector reads everything it reports at scrape time.
type stateCollector struct{ s *server }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descQueueJobs, descNSJobs, descEvents, descAttempts, descSubmitted, descLeaderChanges,
		descSubscribers, descStreamWakeups, descRaftState, descRaftTerm, descRaftCommit, descRaftApplied, descRaftLast} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descSubscribers, float64(s.subscribers.count()))
	counter(descStreamWakeups, float64(s.waker.wakeups.Load()))

	ri := s.cluster.RaftInfo()
	for _, st := range raftStates {
		v := 0.0
		if st == ri.State {
			v = 1
		}
		gauge(descRaftState, v, strings.ToLower(st))
	}
	gauge(descRaftTerm, float64(ri.Term))
	gauge(descRaftCommit, float64(ri.CommitIndex))
	gauge(descRaftApplied, float64(ri.AppliedIndex))
	gauge(descRaftLast, float64(ri.LastIndex))

	if src, ok := s.state.(EventSource); ok {
		counts := src.Events().Counts()
		for k, v := range counts {
			counter(descEvents, float64(v), k)
		}
		byNS := src.Events().CountsByNamespace()
		if byNS[fsm.DefaultNamespace] == nil {
			byNS[fsm.DefaultNamespace] = map[string]uint64{} // the families exist on an idle node too
		}
		for ns, nc := range byNS {
			for _, o := range []fsm.AttemptState{fsm.AttemptSucceeded, fsm.AttemptFailed, fsm.AttemptLost, fsm.AttemptKilled} {
				counter(descAttempts, float64(nc[string(fsm.EventAttempt)+"."+string(o)]), ns, string(o))
			}
			counter(descSubmitted, float64(nc[string(fsm.EventJob)+"."+fsm.NameSubmitted]), ns)
		}
		counter(descLeaderChanges, float64(counts[string(fsm.EventLeader)+"."+fsm.NameChanged]))
	}

	_ = s.state.View(func(tx *fsm.Tx) error {
		for _, st := range fsm.AllStates {
			gauge(descJobs, float64(tx.CountJobsInState(st)), string(st))
		}
		active, err := tx.CountActive()
		if qs := active.ByQueue; err == nil {
			// The default queue always has its series (zero included), so
			// the family exists on an idle cluster too.
			seen := map[fsm.JobState]bool{}
			for _, q := range qs {
				name := q.Queue
				if name == "" {
					name = "default"
					seen[q.State] = true
				}
				gauge(descQueueJobs, float64(q.Jobs), name, string(q.State))
			}
			for _, st := range fsm.ActiveStates {
				if !seen[st] {
					gauge(descQueueJobs, 0, "default", string(st))
				}
			}
		}
		if ns := active.ByNamespace; err == nil {
			namespaceJobs(ns, func(ns string, st fsm.JobState, n int) { gauge(descNSJobs, float64(n), ns, string(st)) })
		}
		return nil
	})
}

// nodeCollector reports one series per node (and per resource, per GPU),
// in a registry of its own (metrics.sources).
type nodeCollector struct{ s *server }

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodeCapacity, descNodeAlloc, descNodeUp, descGPUHealthy} {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	_ = c.s.state.View(func(tx *fsm.Tx) error {
		nodes, err := tx.Nodes()
		if err != nil {
			return err
		}
		alloc, err := tx.AllocatedByNode()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			up := 0.0
			if n.Gossip == fsm.NodeAlive {
				up = 1
			}
			gauge(descNodeUp, up, n.Name)
			resources(n.Capacity, func(res string, v int64) { gauge(descNodeCapacity, float64(v), n.Name, res) })
			resources(alloc[n.Name], func(res string, v int64) { gauge(descNodeAlloc, float64(v), n.Name, res) })
			for _, g := range n.GPUs {
				h := 0.0
				if g.Healthy() {
					h = 1
				}
				gauge(descGPUHealthy, h, n.Name, strconv.Itoa(g.Index), g.UUID, g.Model)
			}
		}
		return nil
	})
}

// resources calls fn for cpu, memory and each named resource.
func resources(r fsm.Resources, fn func(string, int64)) {
	fn("cpu", r.CPU)
	fn("memory", r.MemoryMB)
	for k, v := range r.Named {
		if k == "cpu" || k == "memory" {
			continue
		}
		fn(k, v)
	}
}

// namespaceJobs folds per-namespace counts into at most
// fsm.MaxMetricNamespaces labels (by name; the rest add up under
// fsm.OtherNamespace) and emits them, the default namespace always (zero
// included).
func namespaceJobs(counts []fsm.NamespaceCount, emit func(ns string, st fsm.JobState, n int)) {
	names := map[string]bool{fsm.DefaultNamespace: true}
	for _, c := range counts {
		names[fsm.NamespaceOf(c.Namespace)] = true
	}
	sorted := slices.Sorted(maps.Keys(names))
	label := make(map[string]string, len(sorted))
	for i, n := range sorted {
		label[n] = n
		if i >= fsm.MaxMetricNamespaces && n != fsm.DefaultNamespace {
			label[n] = fsm.OtherNamespace
		}
	}
	type key struct {
		ns string
		st fsm.JobState
	}
	sum := map[key]int{}
	for _, n := range sorted {
		for _, st := range fsm.ActiveStates {
			sum[key{label[n], st}] += 0
		}
	}
	for _, c := range counts {
		sum[key{label[fsm.NamespaceOf(c.Namespace)], c.State}] += c.Jobs
	}
	for k, n := range sum {
		emit(k.ns, k.st, n)
	}
}
