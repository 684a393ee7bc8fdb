package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/fsm"
)

// The cost map of a throughput run (issue 35): what each job cost every
// node, from the counters of its GET /v1/metrics read before the first
// submit and after the last job is seen terminal, divided by the jobs.
// Each node's window includes serving the bench's polls and the two
// scrapes (a few ms, well under a µs per job at 1,000 jobs and more; they
// name the families they read, so a server with thousands of nodes does
// not build its per-node series for them).

// The metrics a cost map reads; a family with several series (events by
// type) is summed.
const (
	metricCPU         = "process_cpu_seconds_total"
	metricLastIndex   = "foreman_raft_last_index"
	metricLogAppends  = "foreman_raft_log_appends_total"
	metricLogBytes    = "foreman_raft_log_bytes_total"
	metricStateCommit = "foreman_state_commits_total"
	metricStateBytes  = "foreman_state_written_bytes_total"
	metricEvents      = "foreman_events_total"
	metricMallocs     = "go_memstats_mallocs_total"
)

var costMetrics = []string{metricCPU, metricLastIndex, metricLogAppends, metricLogBytes,
	metricStateCommit, metricStateBytes, metricEvents, metricMallocs}

// costMap is the "cost" object of foreman bench throughput --json; every
// figure is per job.
type costMap struct {
	// HostCPUUSPerJob is the whole host's busy CPU (agents, supervisors,
	// jobs, kernel) less the bench's own; only when every node is on
	// loopback, i.e. the bench shares the cluster's host.
	HostCPUUSPerJob *float64   `json:"host_cpu_us_per_job,omitempty"`
	Nodes           []nodeCost `json:"nodes"`
}

// nodeCost is one node's share of a job.
type nodeCost struct {
	Name           string  `json:"name"`
	Role           string  `json:"role"`             // leader | follower | replica | client
	CPUUS          float64 `json:"cpu_us"`           // the agent process's CPU
	RaftEntries    float64 `json:"raft_entries"`     // growth of its raft log's last index
	RaftLogAppends float64 `json:"raft_log_appends"` // raft.db commits
	RaftLogBytes   float64 `json:"raft_log_bytes"`   // entries' data
	StateCommits   float64 `json:"state_commits"`    // state file commits (applied batches)
	StateBytes     float64 `json:"state_bytes"`      // what bbolt wrote for them
	Events         float64 `json:"events"`           // events applied, all types
	Allocs         float64 `json:"allocs"`           // Go heap allocations
}

// metricSample is one scrape: metric name → value, summed over series.
type metricSample map[string]float64

// parseMetrics reads the text exposition of GET /v1/metrics, keeping the
// cost map's metrics.
func parseMetrics(r io.Reader) (metricSample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := metricSample{}
	for _, name := range costMetrics {
		mf := mfs[name]
		if mf == nil {
			continue // an older agent, or a client without raft
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				sum += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				sum += m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				sum += m.GetUntyped().GetValue()
			}
		}
		out[name] = sum
	}
	return out, nil
}

// nodeCostOf divides the growth of a node's counters by jobs. A counter
// that went down means the agent restarted in between: no figure.
func nodeCostOf(name, role string, before, after metricSample, jobs int) (nodeCost, error) {
	d := func(m string) float64 { return (after[m] - before[m]) / float64(jobs) }
	for _, m := range costMetrics {
		if after[m] < before[m] && m != metricLastIndex { // a log may be truncated (a follower's conflict)
			return nodeCost{}, fmt.Errorf("%s went down (%v → %v): the agent restarted", m, before[m], after[m])
		}
	}
	return nodeCost{
		Name: name, Role: role,
		CPUUS:          round2(d(metricCPU) * 1e6),
		RaftEntries:    round2(d(metricLastIndex)),
		RaftLogAppends: round2(d(metricLogAppends)),
		RaftLogBytes:   round2(d(metricLogBytes)),
		StateCommits:   round2(d(metricStateCommit)),
		StateBytes:     round2(d(metricStateBytes)),
		Events:         round2(d(metricEvents)),
		Allocs:         round2(d(metricMallocs)),
	}, nil
}

// hostCPU is the host's busy CPU seconds and this process's, at one moment.
type hostCPU struct{ busy, self float64 }

// readHostCPU reads /proc/stat's busy time (user, nice, system, irq,
// softirq, steal; guest time is inside user) and the bench's rusage.
func readHostCPU() (hostCPU, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return hostCPU{}, err
	}
	st, err := fs.Stat()
	if err != nil {
		return hostCPU{}, err
	}
	c := st.CPUTotal
	return hostCPU{busy: c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal, self: selfCPU()}, nil
}

// hostCPUPerJob is the host's busy CPU between two readings less the
// bench's own, in µs per job.
func hostCPUPerJob(before, after hostCPU, jobs int) float64 {
	busy := (after.busy - before.busy) - (after.self - before.self)
	return round2(max(busy, 0) * 1e6 / float64(jobs))
}

// costNode is a node the probe scrapes.
type costNode struct{ name, role, url string }

// costProbe takes the two readings of a run.
type costProbe struct {
	bench  string // the bench's name, for its messages
	hc     *http.Client
	token  string
	nodes  []costNode
	host   bool // every node is on loopback: measure the host too
	before map[string]metricSample
	host0  hostCPU
}

// newCostProbe lists the nodes to scrape: every node not dead or left that
// has an API address, leader first (with serversOnly, the servers and
// replicas: bench nodes' simulated clients have no API). A failure is said
// on stderr and gives a nil probe: the run is measured without its cost
// map. bench names the command in the messages.
func newCostProbe(ctx context.Context, bench string, cl *api.Client, hc *http.Client, token string, serversOnly bool) *costProbe {
	nodes, err := nodeViews(ctx, cl)
	if err != nil {
		cli.Stderrf("bench %s: no cost map: listing the nodes: %v", bench, err)
		return nil
	}
	info, err := cl.Raft(ctx)
	if err != nil {
		cli.Stderrf("bench %s: no cost map: raft state: %v", bench, err)
		return nil
	}
	scheme, _, _ := strings.Cut(cl.Address(), "://") // the nodes speak what the one we ask does
	p := &costProbe{bench: bench, hc: hc, token: token, host: onLoopback(cl.Address())}
	for _, n := range nodes {
		role := "follower"
		switch {
		case n.Role == fsm.RoleClient:
			role = "client"
		case n.Role == fsm.RoleReplica:
			role = "replica"
		case n.Name == info.Leader:
			role = "leader"
		}
		if n.Gossip == fsm.NodeDead || n.Gossip == fsm.NodeLeft || serversOnly && role == "client" {
			continue
		}
		p.host = p.host && onLoopback(n.HTTPAddr)
		if n.HTTPAddr == "" {
			cli.Stderrf("bench %s: cost map: %s (%s) has no API address; left out", bench, n.Name, role)
			continue
		}
		p.nodes = append(p.nodes, costNode{name: n.Name, role: role, url: scheme + "://" + n.HTTPAddr})
	}
	rank := map[string]int{"leader": 0, "follower": 1, "replica": 2, "client": 3}
	slices.SortStableFunc(p.nodes, func(a, b costNode) int {
		if ra, rb := rank[a.role], rank[b.role]; ra != rb {
			return ra - rb
		}
		return strings.Compare(a.name, b.name)
	})
	return p
}

// onLoopback reports whether addr (host:port or a URL) is a loopback address.
func onLoopback(addr string) bool {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		addr = rest
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// start takes the first reading: the nodes, then the host.
func (p *costProbe) start(ctx context.Context) {
	p.before = p.scrapeAll(ctx)
	if p.host {
		h, err := readHostCPU()
		if err != nil {
			cli.Stderrf("bench %s: cost map: no host CPU: %v", p.bench, err)
			p.host = false
		}
		p.host0 = h
	}
}

// finish takes the second reading (the host, then the nodes: the host's
// window lies inside the nodes') and divides by jobs.
func (p *costProbe) finish(ctx context.Context, jobs int) *costMap {
	out := &costMap{Nodes: []nodeCost{}}
	if p.host {
		if h, err := readHostCPU(); err != nil {
			cli.Stderrf("bench %s: cost map: no host CPU: %v", p.bench, err)
		} else {
			v := hostCPUPerJob(p.host0, h, jobs)
			out.HostCPUUSPerJob = &v
		}
	}
	after := p.scrapeAll(ctx)
	for _, n := range p.nodes {
		b, a := p.before[n.name], after[n.name]
		if b == nil || a == nil {
			continue // said when the scrape failed
		}
		nc, err := nodeCostOf(n.name, n.role, b, a, jobs)
		if err != nil {
			cli.Stderrf("bench %s: cost map: %s (%s) left out: %v", p.bench, n.name, n.role, err)
			continue
		}
		out.Nodes = append(out.Nodes, nc)
	}
	return out
}

// costScrapes is how many nodes are scraped at once; costScrapeTimeout
// bounds each scrape (a node that does not answer is left out).
const (
	costScrapes       = 8
	costScrapeTimeout = 10 * time.Second
)

// scrapeAll reads every node's metrics, by name; a node that fails is
// said on stderr and absent.
func (p *costProbe) scrapeAll(ctx context.Context) map[string]metricSample {
	out := make(map[string]metricSample, len(p.nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, costScrapes)
	for _, n := range p.nodes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := p.scrape(ctx, n.url)
			if err != nil {
				cli.Stderrf("bench %s: cost map: %s (%s) left out: %v", p.bench, n.name, n.role, err)
				return
			}
			mu.Lock()
			out[n.name] = s
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// scrape reads one node's metrics, bounded by costScrapeTimeout.
func (p *costProbe) scrape(ctx context.Context, base string) (metricSample, error) {
	ctx, cancel := context.WithTimeout(ctx, costScrapeTimeout)
	defer cancel()
	return scrapeMetrics(ctx, p.hc, p.token, base, costMetrics)
}

// scrapeMetrics reads the families named (of the cost map's) from GET
// base/v1/metrics (operator permission when ACL is on: token, "" for
// none). An agent older than ?name= sends every family; the same are kept.
func scrapeMetrics(ctx context.Context, hc *http.Client, token, base string, names []string) (metricSample, error) {
	q := url.Values{"name": names}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/metrics?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s/v1/metrics: %s: %s", base, resp.Status, strings.TrimSpace(string(msg)))
	}
	return parseMetrics(resp.Body)
}

// printCost writes the cost map's table.
func printCost(w io.Writer, m *costMap) error {
	t := cli.NewTable(w, "NODE", "ROLE", "CPU-µs/JOB", "ENTRIES/JOB", "APPENDS/JOB", "LOG-B/JOB",
		"COMMITS/JOB", "STATE-B/JOB", "EVENTS/JOB", "ALLOCS/JOB")
	f0 := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	f2 := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	for _, n := range m.Nodes {
		t.Row(n.Name, n.Role, f0(n.CPUUS), f2(n.RaftEntries), f2(n.RaftLogAppends), f0(n.RaftLogBytes),
			f2(n.StateCommits), f0(n.StateBytes), f2(n.Events), f0(n.Allocs))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if m.HostCPUUSPerJob != nil {
		_, err := fmt.Fprintf(w, "host (agents, supervisors, jobs, kernel; bench excluded): %.0f CPU-µs/job\n", *m.HostCPUUSPerJob)
		return err
	}
	return nil
}

// benchToken is the token the API client sends (--token, else
// FOREMAN_TOKEN), for the requests the bench makes itself.
func benchToken(opts cli.ClientConfig) string {
	if opts.Token != "" {
		return opts.Token
	}
	return os.Getenv(api.EnvToken)
}

// round2 keeps per-job figures readable.
func round2(f float64) float64 { return math.Round(f*100) / 100 }
