package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// arrayResult is the outcome of foreman bench array.
type arrayResult struct {
	Tasks          int     `json:"tasks"`
	Driver         string  `json:"driver,omitempty"`
	ArrayAcceptMS  float64 `json:"array_accept_ms"`    // one POST /v1/jobs with array
	ArraySeconds   float64 `json:"array_seconds"`      // submit → the array ended
	ArraySucceeded int     `json:"array_succeeded"`    // tasks that succeeded
	ArrayJobsPerS  float64 `json:"array_jobs_per_s"`   // tasks / array_seconds
	Verified       int     `json:"verified,omitempty"` // tasks whose result is their own index (--verify)
	Batch          int     `json:"batch,omitempty"`    // jobs per request of the comparison (0: skipped)
	BatchAcceptMS  float64 `json:"batch_accept_ms,omitempty"`
	BatchSeconds   float64 `json:"batch_seconds,omitempty"`
	BatchSucceeded int     `json:"batch_succeeded,omitempty"`
	BatchJobsPerS  float64 `json:"batch_jobs_per_s,omitempty"`
}

func arrayCommand(driver *ucli.StringFlag) *ucli.Command {
	return benchCommand("array", "a job array of no-op tasks: accepted, and all done; beside the same count submitted as batches", "", timed(benchArray),
		driver,
		&ucli.IntFlag{Name: "tasks", Value: 10000, Usage: "tasks of the array (and jobs of the batches)"},
		&ucli.IntFlag{Name: "parallel", Usage: "the array's %PARALLEL bound (0: none)"},
		&ucli.IntFlag{Name: "batch", Value: 1000, Usage: "jobs per request of the same count submitted as batches (0: skip them)"},
		&ucli.BoolFlag{Name: "verify", Value: true, Usage: "each task writes its index as its result; read every task's back and check each index is there once (--verify=false skips it)"},
		timeoutFlag(15*time.Minute))
}

func benchArray(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	res := arrayResult{Tasks: c.Int("tasks"), Driver: c.String("driver"), Batch: c.Int("batch")}
	if res.Tasks < 1 || res.Batch < 0 || c.Int("parallel") < 0 {
		return fmt.Errorf("--tasks must be at least 1, --batch and --parallel at least 0")
	}
	run := benchRunID()
	// Every job (task or batch job) writes its index, if any, as its
	// result: the same work on both sides.
	writeIndex := httpapi.Argv("sh", "-c", `echo "$FOREMAN_ARRAY_INDEX" > "$FOREMAN_RESULT"`)
	spec := noopSpec(run, res.Driver)
	spec.Command = writeIndex
	spec.Array = httpapi.Array(fmt.Sprintf("0-%d", res.Tasks-1))
	if p := c.Int("parallel"); p > 0 {
		spec.Array = httpapi.Array(fmt.Sprintf("0-%d%%%d", res.Tasks-1, p))
	}
	t0 := time.Now()
	id, _, err := submitJob(ctx, cl, spec, run+"-array")
	if err != nil {
		return err
	}
	res.ArrayAcceptMS = float64(time.Since(t0).Microseconds()) / 1000
	p := &progress{every: 2 * time.Second, last: time.Now()}
	for {
		d, err := retryTransient(ctx, "poll", func() (*api.JobDetail, error) { return cl.GetJob(ctx, id) })
		if err != nil {
			return err
		}
		if a := d.Job.Array; d.Job.State.Terminal() && a != nil {
			res.ArraySeconds = round3(time.Since(t0).Seconds())
			res.ArraySucceeded = a.Succeeded
			break
		} else if a != nil {
			p.printf("array: %d/%d tasks done", a.Succeeded+a.Failed+a.Cancelled, a.Size)
		}
		if err := pause(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for the array: %w", err)
		}
	}
	res.ArrayJobsPerS = round3(float64(res.Tasks) / res.ArraySeconds)
	if c.Bool("verify") {
		if res.Verified, err = verifyArray(ctx, cl, id, res.Tasks); err != nil {
			return err
		}
	}

	if res.Batch > 0 {
		spec := noopSpec(run+"-b", res.Driver)
		spec.Command = writeIndex
		jobs := &benchRun{label: run + "-b"}
		t0 = time.Now()
		if err := jobs.submit(ctx, cl, spec, res.Tasks, res.Batch); err != nil {
			return err
		}
		res.BatchAcceptMS = float64(time.Since(t0).Microseconds()) / 1000
		end, err := waitAllTerminal(ctx, cl, jobs, 10*time.Millisecond)
		if err != nil {
			return err
		}
		res.BatchSeconds = round3(end.Sub(t0).Seconds())
		res.BatchJobsPerS = round3(float64(res.Tasks) / res.BatchSeconds)
		counts, err := jobs.count(ctx, cl)
		if err != nil {
			return err
		}
		res.BatchSucceeded = counts[api.JobSucceeded]
	}

	rows := [][]any{{fmt.Sprintf("array of %d", res.Tasks), ms(res.ArrayAcceptMS), fmt.Sprintf("%.2fs", res.ArraySeconds), res.ArrayJobsPerS, res.ArraySucceeded, res.Verified}}
	if res.Batch > 0 {
		rows = append(rows, []any{fmt.Sprintf("%d as batches of %d", res.Tasks, res.Batch), ms(res.BatchAcceptMS), fmt.Sprintf("%.2fs", res.BatchSeconds), res.BatchJobsPerS, res.BatchSucceeded, ""})
	}
	return printTable(c, res, []string{"", "ACCEPTED", "ALL DONE", "JOBS/S", "SUCCEEDED", "VERIFIED"}, rows...)
}

// verifyArray reads every task's result (8 at a time) and checks it is
// the task's own index: each index ran and wrote once, none is missing
// or another's. It returns how many matched, or an error naming the first
// that did not.
func verifyArray(ctx context.Context, cl *api.Client, id string, n int) (int, error) {
	var ok atomic.Int64
	err := parallel(8, n, func(i int) error {
		b, err := retryTransient(ctx, "result", func() ([]byte, error) { return cl.JobResult(ctx, fsm.TaskID(id, i)) })
		if err == nil && strings.TrimSpace(string(b)) != strconv.Itoa(i) {
			err = fmt.Errorf("task %d's result is %q", i, b)
		}
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		ok.Add(1)
		return nil
	})
	return int(ok.Load()), err
}
