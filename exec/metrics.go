package exec

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// startSeconds is registered with the default registry (GET /v1/metrics).
// The driver runs in the supervisor process, so the agent times the start
// from its side: from taking the attempt off the start queue to the
// supervisor's "started" (prepare, fork, driver start: container set-up
// or exec). Like usage, it is registered on first use, not at package
// init: every start of the binary (CLI, supervisor, container init) runs
// the init of every package in it.
var startSeconds = sync.OnceValue(func() *prometheus.HistogramVec {
	return promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "foreman_attempt_start_duration_seconds",
		Help:    "Time from a node's worker dequeuing an attempt to its driver reporting the job started, by driver.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"driver"})
})

// RegisterMetrics registers this package's metrics with the default
// registry now, with a start-duration series (empty) for each of drivers:
// the agent does at start, so a scrape lists them before the first start
// on this node (a vector without series is not served at all).
func RegisterMetrics(drivers ...string) {
	for _, d := range drivers {
		startSeconds().WithLabelValues(d)
	}
	usage()
	outputMetrics()
}

// What a node's jobs actually use, read at scrape time from the node's
// jobs cgroup (<JobsCgroup>, by default /foreman/<node>: the container
// driver's job cgroups live under it, and where the agent may set it up,
// the process driver's jobs; supervisors stay in the agent's cgroups,
// priority.go). Each node reports its
// own; capacity and allocation (the scheduler's view) come from the
// replicated state. Counted: cgroup v2's cpu.stat usage_usec and
// memory.current; v1's cpuacct.usage and memory.usage_in_bytes of the
// same path in those hierarchies (process jobs join only the cpu one
// there, so v1 counts the container jobs). No cgroup, no series.
var (
	descUsedCPU = prometheus.NewDesc("foreman_node_used_cpu_seconds_total",
		"CPU time used by the jobs of this node, from its jobs cgroup.", []string{"node"}, nil)
	descUsedMemory = prometheus.NewDesc("foreman_node_used_memory_bytes",
		"Memory charged to this node's jobs cgroup (page cache included, as the kernel charges it).", []string{"node"}, nil)
)

// usage is the process's collector of node usage; each running Worker
// adds its node.
var usage = sync.OnceValue(func() *usageCollector {
	c := &usageCollector{root: "/sys/fs/cgroup", nodes: map[string]string{}}
	prometheus.MustRegister(c)
	return c
})

type usageCollector struct {
	root  string // where cgroup filesystems are mounted
	mu    sync.Mutex
	nodes map[string]string // node → its jobs cgroup path (/foreman/n1)
}

// watch reports node's usage from cgroup until the returned stop.
func (c *usageCollector) watch(node, cgroup string) (stop func()) {
	c.mu.Lock()
	c.nodes[node] = cgroup
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.nodes[node] == cgroup {
			delete(c.nodes, node)
		}
		c.mu.Unlock()
	}
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descUsedCPU
	ch <- descUsedMemory
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	nodes := make(map[string]string, len(c.nodes))
	for n, p := range c.nodes {
		nodes[n] = p
	}
	c.mu.Unlock()
	for node, cg := range nodes {
		cpu, mem, cpuOK, memOK := readCgroupUsage(c.root, cg)
		if cpuOK {
			ch <- prometheus.MustNewConstMetric(descUsedCPU, prometheus.CounterValue, cpu, node)
		}
		if memOK {
			ch <- prometheus.MustNewConstMetric(descUsedMemory, prometheus.GaugeValue, mem, node)
		}
	}
}

// NodeUsage reads what node's jobs use now from its jobs cgroup (the
// numbers behind foreman_node_used_*): CPU seconds since the cgroup was
// made and memory bytes. ok is false for a value this process cannot
// measure (no worker here for node, or no cgroup).
func NodeUsage(node string) (cpuSeconds, memBytes float64, cpuOK, memOK bool) {
	u := usage()
	u.mu.Lock()
	cg, ok := u.nodes[node]
	u.mu.Unlock()
	if !ok {
		return 0, 0, false, false
	}
	return readCgroupUsage(u.root, cg)
}

// readCgroupUsage reads cgroup's CPU seconds and memory bytes under root,
// from the unified (v2) hierarchy when root has one, from the v1 cpuacct
// and memory hierarchies otherwise.
func readCgroupUsage(root, cgroup string) (cpuSeconds, memBytes float64, cpuOK, memOK bool) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		dir := filepath.Join(root, cgroup)
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.stat")); err == nil {
			for _, line := range bytes.Split(b, []byte("\n")) {
				if v, ok := bytes.CutPrefix(line, []byte("usage_usec ")); ok {
					if n, err := strconv.ParseUint(string(v), 10, 64); err == nil {
						cpuSeconds, cpuOK = float64(n)/1e6, true
					}
				}
			}
		}
		memBytes, memOK = readUint(filepath.Join(dir, "memory.current"))
		return
	}
	if ns, ok := readUint(filepath.Join(root, "cpuacct", cgroup, "cpuacct.usage")); ok {
		cpuSeconds, cpuOK = ns/1e9, true
	}
	memBytes, memOK = readUint(filepath.Join(root, "memory", cgroup, "memory.usage_in_bytes"))
	return
}

func readUint(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	return float64(n), err == nil
}

// jobsCgroup is the cgroup path of this node's jobs (priority.go).
func (w *Worker) jobsCgroup() string {
	if w.cfg.JobsCgroup != "" {
		return w.cfg.JobsCgroup
	}
	return "/foreman/" + w.cfg.Node
}
