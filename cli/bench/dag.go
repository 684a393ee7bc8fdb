package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// dagResult is the outcome of foreman bench dag.
type dagResult struct {
	Chain          int     `json:"chain"`
	Driver         string  `json:"driver,omitempty"`
	ReleaseP50MS   float64 `json:"release_p50_ms"` // parent finished → child started, one workflow
	ReleaseP99MS   float64 `json:"release_p99_ms"`
	ChainSeconds   float64 `json:"chain_seconds"`
	OneByOneP50MS  float64 `json:"one_by_one_p50_ms"` // the same, jobs submitted one by one by a waiting client
	OneByOneP99MS  float64 `json:"one_by_one_p99_ms"`
	OneByOneSecs   float64 `json:"one_by_one_seconds"`
	AfterP50MS     float64 `json:"after_p50_ms"` // the same, each job submitted up front with after on the one before
	AfterP99MS     float64 `json:"after_p99_ms"`
	AfterSecs      float64 `json:"after_seconds"`
	FanOut         int     `json:"fan_out"`
	FanOutSubmitMS float64 `json:"fan_out_submit_ms"`
	FanOutSeconds  float64 `json:"fan_out_seconds"` // submit → all done
	RandomJobs     int     `json:"random_jobs"`
	RandomSubmitMS float64 `json:"random_submit_ms"` // accepted (201)
	RandomPageMS   float64 `json:"random_first_page_ms"`
}

func dagCommand(driver *ucli.StringFlag) *ucli.Command {
	return benchCommand("dag", "workflows: release latency along a chain (vs one-by-one submits), a fan-out, a large random DAG accepted", "", timed(benchDAG),
		driver,
		&ucli.IntFlag{Name: "chain", Value: 100, Usage: "jobs in the chain"},
		&ucli.BoolFlag{Name: "one-by-one", Value: true, Usage: "also run the chain as jobs submitted one by one by a waiting client (--one-by-one=false skips it)"},
		&ucli.BoolFlag{Name: "after", Value: true, Usage: "also run the chain as jobs submitted up front, each with --after on the one before (--after=false skips it)"},
		&ucli.IntFlag{Name: "fan-out", Value: 10000, Usage: "children of the fan-out's root (0 = skip)"},
		&ucli.IntFlag{Name: "random", Value: 10000, Usage: "jobs of the random DAG (submitted, then cancelled; 0 = skip)"},
		timeoutFlag(15*time.Minute))
}

func benchDAG(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	run, drv := benchRunID(), c.String("driver")
	res := dagResult{Chain: c.Int("chain"), Driver: drv, FanOut: c.Int("fan-out"), RandomJobs: c.Int("random")}
	if res.Chain < 2 {
		return fmt.Errorf("--chain must be at least 2")
	}
	job := func(name string, deps ...string) httpapi.JobSpecInput {
		s := noopSpec(run, drv)
		s.Name, s.DependsOn = name, deps
		return s
	}

	// A chain as one workflow.
	wf := httpapi.WorkflowInput{Name: "bench-chain-" + run}
	for i := range res.Chain {
		var deps []string
		if i > 0 {
			deps = []string{fmt.Sprint("j", i-1)}
		}
		wf.Jobs = append(wf.Jobs, job(fmt.Sprint("j", i), deps...))
	}
	t0 := time.Now()
	sub, err := submitWorkflow(ctx, cl, wf)
	if err != nil {
		return err
	}
	if err := waitWorkflow(ctx, cl, sub.ID); err != nil {
		return err
	}
	res.ChainSeconds = round3(time.Since(t0).Seconds())
	ids := make([]string, len(sub.Jobs))
	for i, j := range sub.Jobs {
		ids[i] = j.ID
	}
	lat, err := releaseLatencies(ctx, cl, ids)
	if err != nil {
		return err
	}
	res.ReleaseP50MS, res.ReleaseP99MS = percentileMS(lat, 50), percentileMS(lat, 99)

	// The same chain submitted one by one by a client that waits for each.
	t0 = time.Now()
	ids = ids[:0]
	for i := range res.Chain * boolInt(c.Bool("one-by-one")) {
		id, _, err := submitJob(ctx, cl, job(fmt.Sprint("k", i)), "")
		if err != nil {
			return err
		}
		if _, err := waitTerminal(ctx, cl, id, time.Millisecond); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if len(ids) > 0 {
		res.OneByOneSecs = round3(time.Since(t0).Seconds())
		if lat, err = releaseLatencies(ctx, cl, ids); err != nil {
			return err
		}
		res.OneByOneP50MS, res.OneByOneP99MS = percentileMS(lat, 50), percentileMS(lat, 99)
	}

	if c.Bool("after") {
		lat, secs, err := afterChain(ctx, cl, res.Chain, func(name string) httpapi.JobSpecInput { return job(name) })
		if err != nil {
			return err
		}
		res.AfterP50MS, res.AfterP99MS, res.AfterSecs = percentileMS(lat, 50), percentileMS(lat, 99), secs
	}

	if res.FanOut > 0 {
		wf = httpapi.WorkflowInput{Name: "bench-fanout-" + run, Jobs: []httpapi.JobSpecInput{job("root")}}
		for i := range min(res.FanOut, fsm.MaxWorkflowJobs-1) {
			wf.Jobs = append(wf.Jobs, job(fmt.Sprint("c", i), "root"))
		}
		t0 = time.Now()
		sub, err := submitWorkflow(ctx, cl, wf)
		if err != nil {
			return err
		}
		res.FanOutSubmitMS = float64(time.Since(t0).Microseconds()) / 1000
		if err := waitWorkflow(ctx, cl, sub.ID); err != nil {
			return err
		}
		res.FanOutSeconds = round3(time.Since(t0).Seconds())
	}

	if res.RandomJobs > 0 {
		rng := rand.New(rand.NewPCG(1, 2))
		wf = httpapi.WorkflowInput{Name: "bench-random-" + run}
		for i := range min(res.RandomJobs, fsm.MaxWorkflowJobs) {
			seen := map[int]bool{}
			var deps []string
			for k := 0; k < 3 && i > 0; k++ {
				if p := rng.IntN(i); !seen[p] {
					seen[p] = true
					deps = append(deps, fmt.Sprint("n", p))
				}
			}
			wf.Jobs = append(wf.Jobs, job(fmt.Sprint("n", i), deps...))
		}
		t0 = time.Now()
		sub, err := submitWorkflow(ctx, cl, wf)
		if err != nil {
			return err
		}
		res.RandomSubmitMS = float64(time.Since(t0).Microseconds()) / 1000
		t0 = time.Now()
		// Through the leader: the node asked may not have applied it yet.
		if _, err := workflowPage(ctx, cl, sub.ID, 0, true); err != nil {
			return err
		}
		res.RandomPageMS = float64(time.Since(t0).Microseconds()) / 1000
		if _, err := cl.CancelWorkflow(ctx, sub.ID, "bench"); err != nil {
			return err
		}
	}

	rows := [][]any{{fmt.Sprintf("chain of %d, one workflow: release", res.Chain), ms(res.ReleaseP50MS), ms(res.ReleaseP99MS), fmt.Sprintf("%.2fs", res.ChainSeconds)}}
	if res.OneByOneSecs > 0 {
		rows = append(rows, []any{fmt.Sprintf("chain of %d, one by one: next start", res.Chain), ms(res.OneByOneP50MS), ms(res.OneByOneP99MS), fmt.Sprintf("%.2fs", res.OneByOneSecs)})
	}
	if res.AfterSecs > 0 {
		rows = append(rows, []any{fmt.Sprintf("chain of %d, --after: release", res.Chain), ms(res.AfterP50MS), ms(res.AfterP99MS), fmt.Sprintf("%.2fs", res.AfterSecs)})
	}
	if res.FanOut > 0 {
		rows = append(rows, []any{fmt.Sprintf("fan-out of %d: submit / all done", res.FanOut), ms(res.FanOutSubmitMS), "", fmt.Sprintf("%.2fs", res.FanOutSeconds)})
	}
	if res.RandomJobs > 0 {
		rows = append(rows, []any{fmt.Sprintf("random DAG of %d: accepted / first page", res.RandomJobs), ms(res.RandomSubmitMS), ms(res.RandomPageMS), ""})
	}
	return printTable(c, res, []string{"", "P50", "P99", "TOTAL"}, rows...)
}

// waitWorkflow polls until the workflow is no longer running.
func waitWorkflow(ctx context.Context, cl *api.Client, id string) error {
	for {
		d, err := workflowPage(ctx, cl, id, 1, false)
		if err != nil && !isNotFound(err) {
			return err
		}
		if err == nil && d.State != api.WorkflowRunning {
			return nil
		}
		if err := pause(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
}

// releaseLatencies is, along a chain, each job's start minus its
// predecessor's finish (the attempts' own times), sorted.
func releaseLatencies(ctx context.Context, cl *api.Client, ids []string) ([]time.Duration, error) {
	var out []time.Duration
	var prevEnd time.Time
	for i, id := range ids {
		d, err := cl.GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		if len(d.Attempts) == 0 {
			return nil, fmt.Errorf("job %s (%d of the chain) never ran: %s", id, i, d.Job.Reason)
		}
		a := d.Attempts[len(d.Attempts)-1]
		if i > 0 {
			out = append(out, a.StartedAt.Sub(prevEnd))
		}
		prevEnd = a.FinishedAt
	}
	return sortDurations(out), nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
