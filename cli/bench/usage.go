package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
)

// UsageResult is the outcome of foreman bench usage (JSON with --json).
type UsageResult struct {
	Jobs    int    `json:"jobs"`
	Driver  string `json:"driver,omitempty"`
	Queries int    `json:"queries"`
	Since   string `json:"since"`
	// Rows is how many rows the last report had.
	Rows int `json:"rows"`
	// GET /v1/usage?since=…&by=namespace round trips, one at a time, on
	// the client's clock.
	roundTrips
	// JobAttempts is the run's jobs' attempts (all ended: the jobs are
	// terminal); UsageAttempts is what the report's attempts grew by over
	// the run. Verified: they are equal (another client's attempts ending
	// meanwhile make it false).
	JobAttempts   int64 `json:"job_attempts"`
	UsageAttempts int64 `json:"usage_attempts"`
	Verified      bool  `json:"verified"`
}

func usageCommand(driver *ucli.StringFlag) *ucli.Command {
	return benchCommand("usage", "GET /v1/usage latency, and that usage counts the attempts of the jobs it ran",
		"Submits --jobs no-op jobs and waits for them, then checks that the usage report's attempts\n"+
			"grew by exactly the jobs' attempts (verified), and times --queries reports over --since by\n"+
			"namespace, one at a time. Usage accounting must be on (it turns on by itself once every\n"+
			"server has the feature); the check assumes no other job ends during the run.",
		timed(benchUsage), driver,
		&ucli.IntFlag{Name: "jobs", Value: 200, Usage: "no-op jobs to run"},
		&ucli.IntFlag{Name: "batch", Value: 100, Usage: "jobs per submit request"},
		&ucli.IntFlag{Name: "queries", Value: 200, Usage: "usage reports to time"},
		&ucli.StringFlag{Name: "since", Value: "365d", Usage: "the reports' range: a duration back (30d, 12h), an RFC 3339 time or a date"},
		timeoutFlag(10*time.Minute))
}

func benchUsage(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	res := UsageResult{Jobs: c.Int("jobs"), Driver: c.String("driver"), Queries: c.Int("queries"), Since: c.String("since")}
	batch := c.Int("batch")
	switch {
	case res.Jobs < 1:
		return fmt.Errorf("--jobs must be at least 1")
	case batch < 1:
		return fmt.Errorf("--batch must be at least 1")
	case res.Queries < 1:
		return fmt.Errorf("--queries must be at least 1")
	}
	// The counts read through the leader (a report after the jobs' ends
	// sees them); the timed queries are plain reads, as foreman usage's.
	cc := cl.Consistent()
	q := api.UsageQuery{Since: res.Since, By: "namespace", Step: "total"}
	// The first report checks --since (a 400 naming it) before any job is
	// submitted, and waits for accounting to be on.
	before, err := usageAttempts(ctx, cc, q, true)
	if err != nil {
		return err
	}
	run := benchRunID()
	spec := noopSpec(run, res.Driver)
	jobs := &benchRun{label: run}
	if err := jobs.submit(ctx, cl, spec, res.Jobs, batch); err != nil {
		return err
	}
	if _, err := waitAllTerminal(ctx, cl, jobs, 20*time.Millisecond); err != nil {
		return err
	}
	if res.JobAttempts, err = retryTransient(ctx, "count", func() (int64, error) { return jobs.attempts(ctx, cl) }); err != nil {
		return err
	}
	after, err := usageAttempts(ctx, cc, q, false)
	if err != nil {
		return err
	}
	res.UsageAttempts = after - before
	res.Verified = res.UsageAttempts == res.JobAttempts
	lat := make([]time.Duration, 0, res.Queries)
	for range res.Queries {
		t0 := time.Now()
		rep, err := cl.Usage(ctx, q)
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		res.Rows = len(rep.Rows)
	}
	res.roundTrips = roundTripsOf(lat)
	return printResult(c, res, func(w io.Writer) error {
		if err := writeTable(w, roundTripsHeader, res.row(fmt.Sprintf("GET /v1/usage since %s by namespace (%d queries, %d rows)", res.Since, res.Queries, res.Rows))); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "attempts: %d jobs' %d, usage's %d: verified %v\n", res.Jobs, res.JobAttempts, res.UsageAttempts, res.Verified)
		return err
	})
}

// usageAttempts is the report's attempts summed over its rows; with wait
// it first polls, at most a minute, until accounting is on.
func usageAttempts(ctx context.Context, cl *api.Client, q api.UsageQuery, wait bool) (int64, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		rep, err := retryTransient(ctx, "usage", func() (*api.UsageReport, error) { return cl.Usage(ctx, q) })
		if err != nil {
			return 0, err
		}
		if rep.Enabled || !wait {
			var n int64
			for _, r := range rep.Rows {
				n += r.Usage.Attempts
			}
			return n, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("usage accounting is not on (GET /v1/usage: enabled false for a minute)")
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// attempts sums the attempts of the run's jobs (the node's view; call it
// once every job is terminal, so all of them have ended).
func (r *benchRun) attempts(ctx context.Context, cl *api.Client) (int64, error) {
	var n int64
	cursor := ""
	for {
		page, err := cl.ListJobs(ctx, api.JobQuery{Limit: 1000, Cursor: cursor})
		if err != nil {
			return 0, err
		}
		for _, j := range page.Jobs {
			if j.ID < r.oldest {
				return n, nil
			}
			if j.Spec.Labels["bench"] == r.label {
				n += int64(j.Attempts)
			}
		}
		if page.NextCursor == "" {
			return n, nil
		}
		cursor = page.NextCursor
	}
}
