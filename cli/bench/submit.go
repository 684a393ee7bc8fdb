package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/httpapi"
)

// submitResult is the outcome of foreman bench submit.
type submitResult struct {
	Jobs          int     `json:"jobs"`     // accepted
	Requests      int     `json:"requests"` // successful requests
	Concurrency   int     `json:"concurrency"`
	Batch         int     `json:"batch"`
	Seconds       float64 `json:"seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	Errors        int     `json:"errors"` // failed requests
	FirstError    string  `json:"first_error,omitempty"`
	P50MS         float64 `json:"submit_p50_ms"` // per request
	P99MS         float64 `json:"submit_p99_ms"`
}

func benchSubmit(c *ucli.Context) error {
	n, conc, batch := c.Int("jobs"), c.Int("concurrency"), c.Int("batch")
	if n < 1 || conc < 1 || batch < 1 {
		return fmt.Errorf("--jobs, --concurrency and --batch must be at least 1")
	}
	cl, err := benchClient(c, conc)
	if err != nil {
		return err
	}
	run := benchRunID()
	spec := noopSpec(run, c.String("driver"))
	if !c.Bool("runnable") {
		// Accepted and stored, but not run while we measure.
		spec.RunAt = httpapi.JSONString(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}
	res, err := measureSubmits(c.Context, cl, n, conc, batch, spec)
	if err != nil {
		return err
	}
	return printResult(c, res, func(w io.Writer) error {
		if res.FirstError != "" {
			cli.Stderrf("first error: %s", res.FirstError)
		}
		return writeTable(w, []string{"JOBS", "CONCURRENCY", "BATCH", "SECONDS", "JOBS/S", "ERRORS", "P50", "P99"},
			[]any{res.Jobs, conc, batch, fmt.Sprintf("%.2f", res.Seconds), fmt.Sprintf("%.0f", res.JobsPerSecond), res.Errors, ms(res.P50MS), ms(res.P99MS)})
	})
}

func submitOnce(ctx context.Context, cl *api.Client, one, batchBody []byte, asBatch bool) error {
	if !asBatch {
		_, _, err := submitJob(ctx, cl, one, "")
		return err
	}
	_, err := submitJobs(ctx, cl, batchBody)
	return err
}

// measureSubmits submits n copies of spec from conc concurrent clients, in
// requests of batch jobs, and times it.
func measureSubmits(ctx context.Context, cl *api.Client, n, conc, batch int, spec httpapi.JobSpecInput) (submitResult, error) {
	var err error
	// Every request of a size sends the same body, encoded once: the work
	// measured is the cluster's, not the client's JSON encoder (the client
	// shares the cores with the agents).
	specs := make([]httpapi.JobSpecInput, batch)
	for i := range specs {
		specs[i] = spec
	}
	oneBody, err := json.Marshal(spec)
	if err != nil {
		return submitResult{}, err
	}
	bodies := map[int][]byte{} // by jobs per request: batch, and the last request's
	for _, size := range []int{batch, n % batch} {
		if size > 0 && batch > 1 {
			if bodies[size], err = json.Marshal(httpapi.BatchSubmitRequest{Jobs: specs[:size]}); err != nil {
				return submitResult{}, err
			}
		}
	}

	requests := (n + batch - 1) / batch
	var accepted, failed atomic.Int64
	lat := make([]time.Duration, requests)
	stop := make(chan struct{})
	go func() { // progress
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				cli.Stderrf("bench submit: %d/%d jobs accepted", accepted.Load(), n)
			}
		}
	}()
	start := time.Now()
	firstErr := parallel(conc, requests, func(r int) error {
		size := min(batch, n-r*batch)
		t0 := time.Now()
		err := submitOnce(ctx, cl, oneBody, bodies[size], batch > 1)
		lat[r] = time.Since(t0)
		if err != nil {
			failed.Add(1)
			return err
		}
		accepted.Add(int64(size))
		return nil
	})
	secs := time.Since(start).Seconds()
	close(stop)

	res := submitResult{
		Jobs: int(accepted.Load()), Concurrency: conc, Batch: batch,
		Seconds: round3(secs), Errors: int(failed.Load()),
		Requests: requests - int(failed.Load()),
	}
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}
	res.JobsPerSecond = round3(float64(res.Jobs) / secs)
	sorted := sortDurations(lat)
	res.P50MS, res.P99MS = percentileMS(sorted, 50), percentileMS(sorted, 99)
	return res, nil
}
