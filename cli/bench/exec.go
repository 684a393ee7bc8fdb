package bench

import (
	"bytes"
	"context"
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// execResult is the outcome of foreman bench exec.
type execResult struct {
	Runs       int    `json:"runs"`
	Driver     string `json:"driver,omitempty"`
	roundTrips        // exec of `echo` → its output and exit code back
}

func execCommand(driver *ucli.StringFlag) *ucli.Command {
	return benchCommand("exec", "foreman exec into a running job: round trip of a short command (output and exit code back), one at a time", "", timed(benchExec),
		driver,
		&ucli.IntFlag{Name: "runs", Value: 100, Usage: "execs to run, one after the other"},
		timeoutFlag(5*time.Minute))
}

func benchExec(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	res := execResult{Runs: c.Int("runs"), Driver: c.String("driver")}
	if res.Runs < 1 {
		return fmt.Errorf("--runs must be at least 1")
	}
	spec := noopSpec(benchRunID(), res.Driver)
	spec.Command = httpapi.Argv("sleep", "600")
	id, _, err := submitJob(ctx, cl, spec, "")
	if err != nil {
		return err
	}
	defer func() { _, _ = cl.CancelJob(context.WithoutCancel(ctx), id, "bench exec done") }()
	if err := waitState(ctx, cl, id, fsm.JobRunning, true); err != nil {
		return err
	}
	lat := make([]time.Duration, 0, res.Runs)
	for i := range res.Runs {
		var out bytes.Buffer
		t0 := time.Now()
		code, err := cl.Exec(ctx, id, 0, api.ExecRequest{Command: []string{"sh", "-c", fmt.Sprintf("echo %d; exit 7", i)}}, api.ExecStreams{Stdout: &out})
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		if want := fmt.Sprintf("%d\n", i); code != 7 || out.String() != want {
			return fmt.Errorf("exec %d: exit %d, output %q; want 7 and %q", i, code, out.String(), want)
		}
	}
	res.roundTrips = roundTripsOf(lat)
	return printTable(c, res, roundTripsHeader, res.row(fmt.Sprintf("%d execs (output and exit code back)", res.Runs)))
}
