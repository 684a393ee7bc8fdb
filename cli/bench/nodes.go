package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

func nodesCommand(driver *ucli.StringFlag) *ucli.Command {
	return benchCommand("nodes", "thousands of simulated clients against the servers: attach, idle cost, submits, placements, a client's death",
		"Runs --clients simulated client agents in this process (the client protocol over real sockets, a fake\n"+
			"executor that finishes each attempt after --job-time ± 50%), attached to the servers of the cluster at\n"+
			"--addr. Phases: attach them all (and report the clients per server once attached and once the servers\n"+
			"have evened them out, at most 2 minutes later); measure the servers' CPU with every client idle (--idle); submit\n"+
			"--submits delayed jobs (accepted submits/s and the leader's CPU per 30,000 with the clients attached);\n"+
			"run --jobs jobs on the clients (placements/s); kill --kill clients holding a long job each, as kill -9\n"+
			"would, and time their jobs' reruns on other clients. The servers must run on this host (their CPU is\n"+
			"read from their /v1/metrics) and without --acl. The clients stay registered (dead) after the run.",
		withClient(64, benchNodes), driver,
		&ucli.IntFlag{Name: "clients", Value: 1000, Usage: "simulated clients"},
		&ucli.DurationFlag{Name: "idle", Value: 10 * time.Second, Usage: "how long the idle servers' CPU is measured"},
		&ucli.IntFlag{Name: "submits", Value: 30000, Usage: "delayed jobs submitted with the clients attached (0: skip)"},
		&ucli.IntFlag{Name: "jobs", Value: 5000, Usage: "jobs run on the simulated clients (0: skip)"},
		&ucli.DurationFlag{Name: "job-time", Value: time.Second, Usage: "how long a simulated attempt runs (± 50%)"},
		&ucli.IntFlag{Name: "kill", Value: 5, Usage: "clients killed while each holds a long job (0: skip)"},
		&ucli.IntFlag{Name: "hold", Value: 100, Usage: "long jobs the clients hold through --starve and --kill-leader"},
		&ucli.DurationFlag{Name: "starve", Usage: "starve the machine (4 busy loops per core) this long with the jobs held (0: skip)"},
		&ucli.BoolFlag{Name: "kill-leader", Usage: "kill the leader (a process on this host) with -9 with the jobs held, last"},
		&ucli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "give up a phase after"})
}

// nodesResult is the outcome of foreman bench nodes.
type nodesResult struct {
	Clients       int     `json:"clients"`
	Servers       int     `json:"servers"`
	AttachSeconds float64 `json:"attach_seconds"`
	// Idle: the servers' CPU before any client attached (raft's idle
	// AppendEntries: see cluster/DESIGN.md "Commit push"), then with every
	// client attached and beating, no jobs.
	BaseServerCPUPct float64   `json:"base_server_cpu_pct"` // all servers together, % of one core
	IdleServerCPUPct float64   `json:"idle_server_cpu_pct"`
	ClientsCPUPct    float64   `json:"clients_server_cpu_pct"` // idle minus base: what the idle clients cost the servers
	IdleServersPct   []float64 `json:"idle_servers_cpu_pct"`
	IdleSimCPUPct    float64   `json:"idle_simulator_cpu_pct"`
	BeatAckP50MS     float64   `json:"beat_ack_p50_ms"` // a beat sent → a ping saying the leader heard it
	BeatAckP99MS     float64   `json:"beat_ack_p99_ms"`
	// Submits with the clients attached.
	Submits         int     `json:"submits"`
	SubmitsPerSec   float64 `json:"submits_per_second"`
	LeaderCPUPer30k float64 `json:"leader_cpu_seconds_per_30k"`
	SubmitErrors    int     `json:"submit_errors"`
	// Jobs run on the clients.
	Jobs             int     `json:"jobs"`
	PlacementsPerSec float64 `json:"placements_per_second"` // first submit → last first attempt seen by a client
	CompletedPerSec  float64 `json:"completed_per_second"`
	// Cost is what each of those jobs cost every server (cost.go); the
	// host's figure leaves out the bench and its simulated clients.
	Cost *costMap `json:"cost,omitempty"`
	// A client's death.
	Killed      int     `json:"killed"`
	RerunP50S   float64 `json:"rerun_p50_seconds"` // kill → the job's next attempt on another client
	RerunMaxS   float64 `json:"rerun_max_seconds"`
	FalseLost   int64   `json:"false_lost"` // attempts taken from a live client before it finished them
	ReportError string  `json:"first_report_error,omitempty"`
	// Spread: the clients per server once attached, and how long the
	// servers took to even them out (cluster/clientspread.go) to within
	// ±20% of even (max 2 minutes).
	SpreadAttached *spreadResult `json:"spread_attached,omitempty"`
	SpreadEven     *spreadResult `json:"spread_even,omitempty"`
	// Disruptions with --hold long jobs held (nodedisrupt.go).
	Starve     *disruptResult `json:"starve,omitempty"`
	LeaderKill *disruptResult `json:"leader_kill,omitempty"`
}

func benchNodes(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	n, timeout := c.Int("clients"), c.Duration("timeout")
	if n < 1 || n > 60000 {
		return fmt.Errorf("--clients: %d (want 1..60000: one loopback address each)", n)
	}
	members, err := cl.Members(ctx)
	if err != nil {
		return err
	}
	scheme := "http://"
	if tlsCfg, _ := cli.ClientTLS(c); tlsCfg != nil {
		scheme = "https://"
	}
	var servers []string
	leaderAddr := ""
	for _, m := range members {
		if m.Status == "alive" && m.HTTPAddr != "" {
			servers = append(servers, scheme+m.HTTPAddr)
			if m.Leader {
				leaderAddr = scheme + m.HTTPAddr
			}
		}
	}
	if len(servers) == 0 || leaderAddr == "" {
		return fmt.Errorf("no alive servers with a leader among %d members", len(members))
	}
	res := nodesResult{Clients: n, Servers: len(servers)}
	run := benchRunID()
	f := &simFleet{run: run, servers: servers, seen: map[string]time.Time{}, firstSeen: map[string]time.Time{},
		finishLongCh: make(chan struct{}),
		long:         func(sp *fsm.JobSpec) bool { return sp.Name == "bench-long" },
	}
	jobTime := c.Duration("job-time")
	f.jobTime = func() time.Duration { return jobTime/2 + time.Duration(rand.Int64N(int64(jobTime)+1)) }
	defer close(f.finishLongCh)

	hc := &http.Client{Timeout: 10 * time.Second}
	idle := c.Duration("idle")
	cli.Stderrf("bench nodes: measuring the servers with no client for %s", idle)
	base, _, err := measureIdle(ctx, hc, servers, idle)
	if err != nil {
		return err
	}
	res.BaseServerCPUPct = base

	// Attach.
	cli.Stderrf("bench nodes: attaching %d simulated clients to %d servers", n, len(servers))
	start := time.Now()
	for i := range n {
		s := newSim(f, i)
		sctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		f.sims = append(f.sims, s)
		go s.run(sctx)
	}
	defer func() {
		for _, s := range f.sims {
			if !s.killed.Load() {
				s.cancel()
			}
		}
	}()
	if err := waitFor(ctx, timeout, func() (bool, string) {
		a := f.attachedCount()
		return a == n, fmt.Sprintf("%d/%d attached", a, n)
	}); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	res.AttachSeconds = round3(time.Since(start).Seconds())
	res.SpreadAttached = spreadOf(f, 0)
	res.SpreadEven = waitEven(ctx, f, time.Now(), 2*time.Minute)
	cli.Stderrf("bench nodes: clients per server %d..%d once attached, %d..%d after %.1fs (%d moved)",
		res.SpreadAttached.Min, res.SpreadAttached.Max, res.SpreadEven.Min, res.SpreadEven.Max, res.SpreadEven.Seconds, res.SpreadEven.Moves)

	// Idle.
	f.mu.Lock()
	f.beatAcks = nil
	f.mu.Unlock()
	self0, w0 := selfCPU(), time.Now()
	cli.Stderrf("bench nodes: %d attached in %.1fs; measuring the idle servers for %s", n, res.AttachSeconds, idle)
	if res.IdleServerCPUPct, res.IdleServersPct, err = measureIdle(ctx, hc, servers, idle); err != nil {
		return err
	}
	res.ClientsCPUPct = round3(res.IdleServerCPUPct - res.BaseServerCPUPct)
	res.IdleSimCPUPct = round3(100 * (selfCPU() - self0) / time.Since(w0).Seconds())
	f.mu.Lock()
	acks := sortDurations(append([]time.Duration(nil), f.beatAcks...))
	f.mu.Unlock()
	res.BeatAckP50MS, res.BeatAckP99MS = percentileMS(acks, 50), percentileMS(acks, 99)

	// Submits with the clients attached.
	if k := c.Int("submits"); k > 0 {
		spec := noopSpec(run, "")
		spec.RunAt = httpapi.JSONString(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		l0, err := serversCPU(ctx, hc, []string{leaderAddr})
		if err != nil {
			return err
		}
		sr, err := measureSubmits(ctx, cl, k, 64, 1, spec)
		if err != nil {
			return err
		}
		l1, err := serversCPU(ctx, hc, []string{leaderAddr})
		if err != nil {
			return err
		}
		res.Submits, res.SubmitsPerSec, res.SubmitErrors = sr.Jobs, sr.JobsPerSecond, sr.Errors
		if sr.Jobs > 0 {
			res.LeaderCPUPer30k = round3((l1[0] - l0[0]) * 30000 / float64(sr.Jobs))
		}
		cli.Stderrf("bench nodes: %d submits at %.0f/s", sr.Jobs, sr.JobsPerSecond)
	}

	// Jobs run on the clients.
	if k := c.Int("jobs"); k > 0 {
		cost := newCostProbe(ctx, "nodes", cl, hc, benchToken(cli.ClientOptions(c)), true)
		if cost != nil {
			cost.start(ctx)
		}
		jr, err := runOnSims(ctx, cl, f, run, c.String("driver"), k, timeout)
		if err != nil {
			return err
		}
		res.Jobs, res.PlacementsPerSec, res.CompletedPerSec = k, jr.placements, jr.completed
		if cost != nil {
			res.Cost = cost.finish(ctx, k)
		}
	}

	// A client's death.
	if k := c.Int("kill"); k > 0 {
		p50, mx, err := killSims(ctx, cl, f, run, k, timeout)
		if err != nil {
			return err
		}
		res.Killed, res.RerunP50S, res.RerunMaxS = k, p50, mx
	}
	if err := disrupt(c, cl, f, run, servers, leaderAddr, timeout, &res); err != nil {
		return err
	}
	res.FalseLost = f.falseLost.Load()
	if e, ok := f.reportErr.Load().(string); ok {
		res.ReportError = e
	}
	return printResult(c, res, res.text)
}

// text is bench nodes' outcome without --json: a table, a line per
// phase that ran, and the cost map.
func (res *nodesResult) text(w io.Writer) error {
	if err := writeTable(w, []string{"CLIENTS", "ATTACH", "BASE CPU", "IDLE CPU", "BEAT ACK P99", "SUBMITS/S", "LEADER CPU/30K", "PLACED/S", "DONE/S", "RERUN P50", "RERUN MAX", "FALSE LOST"},
		[]any{res.Clients, fmt.Sprintf("%.1fs", res.AttachSeconds), fmt.Sprintf("%.1f%%", res.BaseServerCPUPct), fmt.Sprintf("%.1f%%", res.IdleServerCPUPct), fmt.Sprintf("%.0fms", res.BeatAckP99MS),
			fmt.Sprintf("%.0f", res.SubmitsPerSec), fmt.Sprintf("%.2fs", res.LeaderCPUPer30k), fmt.Sprintf("%.0f", res.PlacementsPerSec),
			fmt.Sprintf("%.0f", res.CompletedPerSec), fmt.Sprintf("%.1fs", res.RerunP50S), fmt.Sprintf("%.1fs", res.RerunMaxS), res.FalseLost}); err != nil {
		return err
	}
	if a, e := res.SpreadAttached, res.SpreadEven; a != nil && e != nil {
		fmt.Fprintf(w, "clients per server (min..max): %d..%d once attached; %d..%d after %.1fs, even (±20%%): %v, %d moved\n",
			a.Min, a.Max, e.Min, e.Max, e.Seconds, e.Even, e.Moves)
	}
	for _, d := range []struct {
		what string
		r    *disruptResult
	}{{"starved", res.Starve}, {"leader killed", res.LeaderKill}} {
		if d.r != nil {
			fmt.Fprintf(w, "%s: %d held jobs, every client confirmed again %.1fs after, false lost %d, rerun %d, failed %d\n",
				d.what, d.r.Held, d.r.ReattachS, d.r.FalseLost, d.r.Rerun, d.r.Failed)
		}
	}
	if res.Cost == nil {
		return nil
	}
	fmt.Fprintln(w)
	return printCost(w, res.Cost)
}

// spreadResult is the attached clients per server at one moment.
type spreadResult struct {
	Max     int     `json:"max"`
	Min     int     `json:"min"`
	Even    bool    `json:"even"`    // every server within ±20% of the mean
	Seconds float64 `json:"seconds"` // since the phase began
	Moves   int64   `json:"moves"`   // planned moves the sims followed so far
}

func spreadOf(f *simFleet, since float64) *spreadResult {
	counts := f.spread()
	r := &spreadResult{Min: -1, Seconds: round3(since), Moves: f.moves.Load()}
	total := 0
	for _, n := range counts {
		total += n
		r.Max = max(r.Max, n)
		if r.Min < 0 || n < r.Min {
			r.Min = n
		}
	}
	mean := float64(total) / float64(max(len(counts), 1))
	r.Even = float64(r.Max) <= 1.2*mean && float64(r.Min) >= 0.8*mean
	return r
}

// waitEven polls the spread until it is even or d has passed since from.
func waitEven(ctx context.Context, f *simFleet, from time.Time, d time.Duration) *spreadResult {
	for {
		r := spreadOf(f, time.Since(from).Seconds())
		if r.Even || time.Since(from) > d || ctx.Err() != nil {
			return r
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// disrupt runs the --starve and --kill-leader phases with --hold long
// jobs held, judging the jobs through a server that is not the leader.
func disrupt(c *ucli.Context, cl *api.Client, f *simFleet, run string, servers []string, leaderAddr string, timeout time.Duration, res *nodesResult) error {
	d, kill := c.Duration("starve"), c.Bool("kill-leader")
	if d <= 0 && !kill {
		return nil
	}
	ctx := c.Context
	held, err := holdJobs(ctx, cl, f, run, max(c.Int("hold"), 1), timeout)
	if err != nil {
		return err
	}
	judgeVia := func(cl *api.Client) func(*disruptResult) error {
		return func(r *disruptResult) error { return judgeHeld(ctx, cl, held, r) }
	}
	if d > 0 {
		r, err := starve(ctx, f, d, timeout, judgeVia(cl))
		if err != nil {
			return fmt.Errorf("starve: %w", err)
		}
		res.Starve = &r
	}
	if kill {
		// The leader now: a starved cluster may have elected another.
		members, err := cl.Members(ctx)
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.Leader && m.Status == "alive" {
				leaderAddr = strings.SplitN(leaderAddr, "://", 2)[0] + "://" + m.HTTPAddr
			}
		}
		var other string
		for _, s := range servers {
			if s != leaderAddr {
				other = s
			}
		}
		if other == "" {
			return errors.New("--kill-leader: no server but the leader")
		}
		survivor, err := cli.NewClient(other, cli.ClientConfig{})
		if err != nil {
			return err
		}
		r, err := killLeader(ctx, f, leaderAddr, timeout, judgeVia(survivor))
		if err != nil {
			return fmt.Errorf("kill the leader: %w", err)
		}
		res.LeaderKill = &r
	}
	return nil
}

type simJobsResult struct{ placements, completed float64 }

// runOnSims submits k jobs for the sims and waits until they all finished.
func runOnSims(ctx context.Context, cl *api.Client, f *simFleet, run, driver string, k int, timeout time.Duration) (simJobsResult, error) {
	spec := noopSpec(run, driver)
	spec.Constraints = []string{"sim == " + run}
	done0 := f.finished.Load()
	start := time.Now()
	var ids []string
	for left := k; left > 0; {
		size := min(1000, left)
		specs := make([]httpapi.JobSpecInput, size)
		for i := range specs {
			specs[i] = spec
		}
		subs, err := submitJobs(ctx, cl, specs)
		if err != nil {
			return simJobsResult{}, fmt.Errorf("submit jobs for the clients: %w", err)
		}
		for _, s := range subs {
			ids = append(ids, s.ID)
		}
		left -= size
	}
	cli.Stderrf("bench nodes: %d jobs submitted for the clients", k)
	if err := waitFor(ctx, timeout, func() (bool, string) {
		d := f.finished.Load() - done0
		return d >= int64(k), fmt.Sprintf("%d/%d jobs done", d, k)
	}); err != nil {
		return simJobsResult{}, fmt.Errorf("jobs: %w", err)
	}
	took := time.Since(start).Seconds()
	var lastPlaced time.Time
	f.mu.Lock()
	for _, id := range ids {
		if t := f.firstSeen[id]; t.After(lastPlaced) {
			lastPlaced = t
		}
	}
	f.mu.Unlock()
	return simJobsResult{placements: round3(float64(k) / lastPlaced.Sub(start).Seconds()), completed: round3(float64(k) / took)}, nil
}

// killSims runs k long jobs on the sims, kills the sims holding them and
// times the jobs' next attempts on other sims.
func killSims(ctx context.Context, cl *api.Client, f *simFleet, run string, k int, timeout time.Duration) (p50, mx float64, err error) {
	jobs, err := holdJobs(ctx, cl, f, run, k, timeout)
	if err != nil {
		return 0, 0, err
	}
	holders := f.holders(jobs)
	var mu sync.Mutex
	killedAt := map[string]time.Time{}
	victims := map[string]bool{}
	reran := map[string]time.Duration{}
	f.mu.Lock()
	f.onSeen = func(jobID string, num int, node string, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if t, ok := killedAt[jobID]; ok && num > 1 && !victims[node] {
			if _, done := reran[jobID]; !done {
				reran[jobID] = at.Sub(t)
			}
		}
	}
	f.mu.Unlock()
	cli.Stderrf("bench nodes: killing %d clients holding %d long jobs", len(holders), k)
	for s, js := range holders {
		mu.Lock()
		victims[s.name] = true
		now := time.Now()
		for _, id := range js {
			killedAt[id] = now
		}
		mu.Unlock()
		s.kill()
	}
	if err := waitFor(ctx, timeout, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(reran) == k, fmt.Sprintf("%d/%d long jobs rerun", len(reran), k)
	}); err != nil {
		return 0, 0, err
	}
	var ds []time.Duration
	mu.Lock()
	for _, d := range reran {
		ds = append(ds, d)
	}
	mu.Unlock()
	sorted := sortDurations(ds)
	return round3(percentileMS(sorted, 50) / 1000), round3(percentileMS(sorted, 100) / 1000), nil
}

// waitFor polls cond every 100 ms until it holds, printing its progress
// every few seconds.
func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	last := time.Now()
	for {
		ok, what := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s: %s", timeout, what)
		}
		if time.Since(last) > 3*time.Second {
			cli.Stderrf("bench nodes: %s", what)
			last = time.Now()
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// measureIdle is the servers' CPU over d, in % of one core: the sum and
// each server's.
func measureIdle(ctx context.Context, hc *http.Client, servers []string, d time.Duration) (sum float64, each []float64, err error) {
	cpu0, err := serversCPU(ctx, hc, servers)
	if err != nil {
		return 0, nil, err
	}
	w0 := time.Now()
	if err := pause(ctx, d); err != nil {
		return 0, nil, err
	}
	cpu1, err := serversCPU(ctx, hc, servers)
	if err != nil {
		return 0, nil, err
	}
	wall := time.Since(w0).Seconds()
	for i := range servers {
		pct := round3(100 * (cpu1[i] - cpu0[i]) / wall)
		each = append(each, pct)
		sum = round3(sum + pct)
	}
	return sum, each, nil
}

// serversCPU reads process_cpu_seconds_total from each server's metrics.
func serversCPU(ctx context.Context, hc *http.Client, servers []string) ([]float64, error) {
	out := make([]float64, len(servers))
	for i, s := range servers {
		m, err := scrapeMetrics(ctx, hc, "", s, []string{metricCPU})
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", s, err)
		}
		v, ok := m[metricCPU]
		if !ok {
			return nil, fmt.Errorf("metrics of %s: no %s", s, metricCPU)
		}
		out[i] = v
	}
	return out, nil
}

// selfCPU is this process's user+system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
