package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// latencyResult is the outcome of foreman bench latency. Start is when the
// client first saw the attempt's started_at through the API, finish when it
// first saw the job terminal; both from the client's submit call.
type latencyResult struct {
	Jobs        int     `json:"jobs"`
	Driver      string  `json:"driver,omitempty"`
	GPUs        int     `json:"gpus,omitempty"`
	GPUMemory   string  `json:"gpu_memory,omitempty"`
	PollMS      float64 `json:"poll_ms"`
	Errors      int     `json:"errors"` // jobs that did not succeed
	SubmitP50MS float64 `json:"submit_p50_ms"`
	StartP50MS  float64 `json:"start_p50_ms"`
	StartP95MS  float64 `json:"start_p95_ms"`
	StartP99MS  float64 `json:"start_p99_ms"`
	FinishP50MS float64 `json:"finish_p50_ms"`
	FinishP95MS float64 `json:"finish_p95_ms"`
	FinishP99MS float64 `json:"finish_p99_ms"`
}

func benchLatency(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	n, poll := c.Int("jobs"), c.Duration("poll")
	if n < 1 {
		return fmt.Errorf("--jobs must be at least 1")
	}
	run := benchRunID()
	spec := noopSpec(run, c.String("driver"))
	if g := c.Int("gpus"); g != 0 || c.String("gpu-memory") != "" {
		spec.Resources = &httpapi.ResourcesInput{}
		if g != 0 {
			n := int64(g)
			spec.Resources.GPUs = &n
		}
		if m := c.String("gpu-memory"); m != "" {
			spec.Resources.GPUMemory = httpapi.JSONString(m) // the server parses the size
		}
	}
	var sub, start, finish []time.Duration
	errs := 0
	p := &progress{every: 2 * time.Second, last: time.Now()}
	for i := range n {
		t0 := time.Now()
		id, _, err := submitJob(ctx, cl, spec, "")
		if err != nil {
			return err
		}
		sub = append(sub, time.Since(t0))
		var started time.Duration
		for {
			d, err := jobDetail(ctx, cl, id)
			if err != nil && !isNotFound(err) { // a follower may not have the job yet
				return err
			}
			now := time.Since(t0)
			if err == nil {
				if started == 0 && attemptStarted(d) {
					started = now
				}
				if d.Job.State.Terminal() {
					if started == 0 { // finished without a start (failed to start)
						started = now
					}
					if d.Job.State != fsm.JobSucceeded {
						errs++
					}
					start, finish = append(start, started), append(finish, now)
					break
				}
			}
			if now > time.Minute {
				return fmt.Errorf("job %s did not finish within a minute", id)
			}
			if err := pause(ctx, poll); err != nil {
				return err
			}
		}
		p.printf("%d/%d jobs", i+1, n)
	}
	res := latencyResult{Jobs: n, Driver: c.String("driver"), GPUs: c.Int("gpus"), GPUMemory: c.String("gpu-memory"),
		PollMS: float64(poll.Microseconds()) / 1000, Errors: errs}
	sortDurations(sub)
	sortDurations(start)
	sortDurations(finish)
	res.SubmitP50MS = percentileMS(sub, 50)
	res.StartP50MS, res.StartP95MS, res.StartP99MS = percentileMS(start, 50), percentileMS(start, 95), percentileMS(start, 99)
	res.FinishP50MS, res.FinishP95MS, res.FinishP99MS = percentileMS(finish, 50), percentileMS(finish, 95), percentileMS(finish, 99)
	return printResult(c, res, func(w io.Writer) error {
		if errs > 0 {
			cli.Stderrf("%d of %d jobs did not succeed", errs, n)
		}
		return writeTable(w, []string{"", "P50", "P95", "P99"},
			[]any{"submit (ack)", ms(res.SubmitP50MS), "", ""},
			[]any{"submit → start", ms(res.StartP50MS), ms(res.StartP95MS), ms(res.StartP99MS)},
			[]any{"submit → finish", ms(res.FinishP50MS), ms(res.FinishP95MS), ms(res.FinishP99MS)})
	})
}

func attemptStarted(d *httpapi.JobDetail) bool {
	for _, a := range d.Attempts {
		if !a.StartedAt.IsZero() {
			return true
		}
	}
	return false
}

func isNotFound(err error) bool {
	ae, ok := err.(*api.Error)
	return ok && ae.Status == 404
}

// throughputResult is the outcome of foreman bench throughput.
type throughputResult struct {
	Jobs               int     `json:"jobs"`
	Driver             string  `json:"driver,omitempty"`
	Succeeded          int     `json:"succeeded"`
	Failed             int     `json:"failed"`
	SubmitSeconds      float64 `json:"submit_seconds"`
	Seconds            float64 `json:"seconds"` // first submit → all terminal
	CompletedPerSecond float64 `json:"completed_per_second"`
	// Cost is what each job cost every node (cost.go); absent when the
	// nodes could not be listed.
	Cost *costMap `json:"cost,omitempty"`
}

func benchThroughput(c *ucli.Context) error {
	n, batch := c.Int("jobs"), c.Int("batch")
	if n < 1 || batch < 1 {
		return fmt.Errorf("--jobs and --batch must be at least 1")
	}
	cl, hc, err := benchClientHTTP(c, 4)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	cost := newCostProbe(ctx, "throughput", cl, hc, benchToken(cli.ClientOptions(c)), false)
	if cost != nil {
		cost.start(ctx)
	}
	run := benchRunID()
	jobs := &benchRun{label: run}
	t0 := time.Now()
	if err := jobs.submit(ctx, cl, noopSpec(run, c.String("driver")), n, batch); err != nil {
		return err
	}
	submitted := time.Since(t0)
	cli.Stderrf("bench throughput: %d jobs submitted in %s", n, cli.RoundDur(submitted))
	end, err := waitAllTerminal(ctx, cl, jobs, 10*time.Millisecond)
	if err != nil {
		return err
	}
	secs := end.Sub(t0).Seconds()
	var costs *costMap
	if cost != nil {
		costs = cost.finish(ctx, n)
	}
	counts, err := retryTransient(ctx, "count", func() (map[api.JobState]int, error) { return jobs.count(ctx, cl) })
	if err != nil {
		return err
	}
	res := throughputResult{
		Jobs: n, Driver: c.String("driver"), Succeeded: counts[api.JobSucceeded],
		Failed:        counts[api.JobFailed] + counts[api.JobCancelled],
		SubmitSeconds: round3(submitted.Seconds()), Seconds: round3(secs),
		CompletedPerSecond: round3(float64(n) / secs),
		Cost:               costs,
	}
	return printResult(c, res, func(w io.Writer) error {
		if err := writeTable(w, []string{"JOBS", "SUCCEEDED", "FAILED", "SUBMIT", "TOTAL", "COMPLETED/S"},
			[]any{n, res.Succeeded, res.Failed, fmt.Sprintf("%.2fs", res.SubmitSeconds), fmt.Sprintf("%.2fs", secs), fmt.Sprintf("%.0f", res.CompletedPerSecond)}); err != nil || costs == nil {
			return err
		}
		fmt.Fprintln(w)
		return printCost(w, costs)
	})
}

// SleepResult is the outcome of foreman bench sleep.
type SleepResult struct {
	Jobs          int     `json:"jobs"`
	Nodes         int     `json:"nodes"`
	Slots         int     `json:"slots"`
	CPUPerJob     int64   `json:"cpu_per_job_millicores"`
	Duration      float64 `json:"duration_seconds"`
	Succeeded     int     `json:"succeeded"`
	WallSeconds   float64 `json:"wall_seconds"`
	IdealSeconds  float64 `json:"ideal_seconds"`
	SerialSeconds float64 `json:"serial_seconds"`
	Speedup       float64 `json:"speedup"`
	Efficiency    float64 `json:"efficiency"`
}

// sleepPollLead is how long before the ideal end foreman bench sleep
// starts polling for the jobs' ends.
const sleepPollLead = 100 * time.Millisecond

// cpuSlots finds the alive, eligible nodes with CPU, waits until they are
// ready, and sizes a slot: the smallest usable node's CPU / perNode, so
// every node fits floor(its CPU / slot) jobs (cpu, in millicores; slots in
// all).
func cpuSlots(ctx context.Context, c *ucli.Context, cl *api.Client, perNode int) (usable []fsm.Node, cpu int64, slots int, err error) {
	nodes, err := nodeViews(ctx, cl)
	if err != nil {
		return nil, 0, 0, err
	}
	minCPU := int64(math.MaxInt64)
	for _, nv := range nodes {
		if nv.Gossip != fsm.NodeAlive || nv.Eligibility != fsm.Eligible || nv.Capacity.CPU <= 0 {
			continue
		}
		usable = append(usable, nv.Node)
		minCPU = min(minCPU, nv.Capacity.CPU)
	}
	if len(usable) == 0 {
		return nil, 0, 0, fmt.Errorf("no alive, eligible node with CPU capacity")
	}
	if err := waitNodesReady(ctx, cl, usable, cli.ClientOptions(c)); err != nil {
		return nil, 0, 0, err
	}
	cpu = minCPU / int64(perNode)
	for _, nd := range usable {
		slots += int(nd.Capacity.CPU / cpu)
	}
	return usable, cpu, slots, nil
}

// slotSpec is a job that sleeps d holding cpu millicores: one slot of
// cpuSlots.
func slotSpec(run, driver string, d time.Duration, cpu int64) httpapi.JobSpecInput {
	spec := noopSpec(run, driver)
	spec.Command = httpapi.Argv("sleep", strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
	spec.Resources = &httpapi.ResourcesInput{CPU: []byte(strconv.FormatInt(cpu, 10))}
	return spec
}

func benchSleep(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	n, dur, perNode := c.Int("jobs"), c.Duration("duration"), c.Int("per-node")
	if n < 1 || perNode < 1 || dur <= 0 {
		return fmt.Errorf("--jobs and --per-node must be at least 1, --duration positive")
	}
	usable, cpu, slots, err := cpuSlots(ctx, c, cl, perNode)
	if err != nil {
		return err
	}
	waves := (n + slots - 1) / slots
	ideal := time.Duration(waves) * dur

	run := benchRunID()
	spec := slotSpec(run, c.String("driver"), dur, cpu)
	specs := make([]httpapi.JobSpecInput, n)
	for i := range specs {
		specs[i] = spec
	}
	cli.Stderrf("bench sleep: %d jobs × %s on %d nodes, %d slots of %dm CPU: ideal %s", n, dur, len(usable), slots, cpu, ideal)
	jobs := &benchRun{label: run}
	t0 := time.Now()
	subs, err := submitJobs(ctx, cl, specs)
	if err != nil {
		return err
	}
	jobs.add(subs)
	// No run can end before the ideal (each slot runs its waves one after
	// the other), so the client stays quiet until just before it — polling
	// every few milliseconds for the whole run took CPU from the agents on
	// a small machine — and then polls every millisecond: the wall time
	// is the moment the last job was seen terminal, and a 5 ms poll added
	// 2.5 ms to it on average.
	quiet := time.Until(t0.Add(ideal - sleepPollLead))
	if quiet > 0 {
		if err := pause(ctx, quiet); err != nil {
			return fmt.Errorf("waiting for the jobs to finish: %w", err)
		}
	}
	end, err := jobs.waitRecentTerminal(ctx, cl, time.Millisecond)
	if err != nil {
		return err
	}
	wall := end.Sub(t0)
	counts, err := jobs.count(ctx, cl)
	if err != nil {
		return err
	}
	res := SleepResult{
		Jobs: n, Nodes: len(usable), Slots: slots, CPUPerJob: cpu, Duration: dur.Seconds(),
		Succeeded: counts[api.JobSucceeded], WallSeconds: round3(wall.Seconds()),
		IdealSeconds: ideal.Seconds(), SerialSeconds: float64(n) * dur.Seconds(),
		Speedup:    round3(float64(n) * dur.Seconds() / wall.Seconds()),
		Efficiency: round3(ideal.Seconds() / wall.Seconds()),
	}
	return printResult(c, res, func(w io.Writer) error {
		if res.Succeeded != n {
			cli.Stderrf("%d of %d jobs did not succeed", n-res.Succeeded, n)
		}
		return writeTable(w, []string{"JOBS", "NODES", "SLOTS", "WALL", "IDEAL", "SPEED-UP", "EFFICIENCY"},
			[]any{n, res.Nodes, slots, fmt.Sprintf("%.3fs", res.WallSeconds), fmt.Sprintf("%.1fs", res.IdealSeconds),
				fmt.Sprintf("%.2f×", res.Speedup), fmt.Sprintf("%.1f%%", 100*res.Efficiency)})
	})
}

// waitNodesReady waits until every node is ready (/v1/ready: it knows the
// leader and its FSM caught up). A node that just joined is alive in gossip
// and eligible before it has replayed the log: a job placed on it then
// started only once it caught up — after a 5,000-job throughput run, the
// first sleep run on a just-joined fourth node lost half a second to a
// second to it (efficiency 0.895 instead of 0.98), a property of the set-up,
// not of the waves being measured.
func waitNodesReady(ctx context.Context, cl *api.Client, nodes []fsm.Node, opts cli.ClientConfig) error {
	members, err := cl.Members(ctx)
	if err != nil {
		return err
	}
	// Ready alone is not enough: a node replaying the log batch by batch
	// has applied everything it was told is committed between batches. So
	// each node must also have applied nearly what the answering node had
	// committed before we asked — nearly: an idle follower learns the
	// commit of the last few entries (a commit push's barrier, reports)
	// only with the next entry, which may be a minute away.
	info, err := cl.Raft(ctx)
	if err != nil {
		return err
	}
	target := info.CommitIndex
	addr := make(map[string]string, len(members))
	for _, m := range members {
		addr[m.Name] = m.HTTPAddr
	}
	for _, nd := range nodes {
		a := addr[nd.Name]
		if a == "" {
			continue // not in gossip: nothing to ask
		}
		scheme, _, _ := strings.Cut(cl.Address(), "://") // the members speak what the one we asked does
		nc, err := cli.NewClient(scheme+"://"+a, opts)
		if err != nil {
			return err
		}
		for first := true; ; first = false {
			err := nc.Ready(ctx)
			if err == nil {
				var ri *api.RaftInfo
				if ri, err = nc.Raft(ctx); err == nil && ri.AppliedIndex+readySlack < target {
					err = fmt.Errorf("applied index %d behind %d", ri.AppliedIndex, target)
				}
			}
			if err == nil {
				break
			}
			if first {
				cli.Stderrf("bench sleep: waiting for %s to catch up (%v)", nd.Name, err)
			}
			if err := pause(ctx, 10*time.Millisecond); err != nil {
				return fmt.Errorf("waiting for %s to be ready: %w", nd.Name, err)
			}
		}
	}
	return nil
}

// readySlack is how many entries a node may be behind and count as caught
// up (a replaying node is hundreds or thousands behind).
const readySlack = 32

// waitRecentTerminal is waitAllTerminal for a run whose jobs are the newest
// in the cluster (nothing else submits meanwhile). It lists only as many of
// the newest jobs as the run has, once, to learn which are not terminal;
// then it polls just those, one GET each, dropping each that is terminal
// and stopping at the first that is not. The last jobs of a sleep run all
// run in its last wave, so a poll is usually one small read.
//
// Polling costs the node answering it (the leader): count's pages of 1,000
// jobs every 5 ms took 80–100 ms off the wall time a sleep run measured
// once a throughput run had left 5,000 jobs in the state, and listing the
// run's 20 jobs every millisecond still took ~1 ms of the leader's CPU per
// poll (~0.3 ms for one job): most of a core, on a two-core machine, while
// the last wave's final reports were being committed.
func (r *benchRun) waitRecentTerminal(ctx context.Context, cl *api.Client, poll time.Duration) (time.Time, error) {
	left, err := r.outstandingRecent(ctx, cl)
	if err != nil {
		return time.Time{}, err
	}
	for {
		for len(left) > 0 {
			d, err := cl.GetJob(ctx, left[0])
			if err != nil {
				return time.Time{}, err
			}
			if !d.Job.State.Terminal() {
				break
			}
			left = left[1:]
		}
		if len(left) == 0 {
			return time.Now(), nil
		}
		if err := pause(ctx, poll); err != nil {
			return time.Time{}, fmt.Errorf("waiting for the jobs to finish: %w", err)
		}
	}
}

// outstandingRecent lists the run's jobs that are not terminal, newest
// first. Every job of the run must be visible (the submit committed them).
func (r *benchRun) outstandingRecent(ctx context.Context, cl *api.Client) ([]string, error) {
	var left []string
	seen, cursor := 0, ""
	for {
		page, err := cl.ListJobs(ctx, api.JobQuery{Limit: max(r.total, 1), Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, j := range page.Jobs {
			if j.ID < r.oldest {
				break
			}
			if j.Spec.Labels["bench"] != r.label {
				continue
			}
			seen++
			if !j.State.Terminal() {
				left = append(left, j.ID)
			}
		}
		if page.NextCursor == "" || (len(page.Jobs) > 0 && page.Jobs[len(page.Jobs)-1].ID < r.oldest) {
			break
		}
		cursor = page.NextCursor
	}
	if seen != r.total {
		return nil, fmt.Errorf("%d of the run's %d jobs are visible", seen, r.total)
	}
	return left, nil
}
