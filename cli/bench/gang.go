package bench

import (
	"context"
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// gangResult is the outcome of foreman bench gang.
type gangResult struct {
	Runs         int     `json:"runs"`
	Size         int     `json:"size"`
	SpreadP50MS  float64 `json:"start_spread_p50_ms"` // last task started − first, per placement
	SpreadMaxMS  float64 `json:"start_spread_max_ms"`
	AllDoneP50MS float64 `json:"submit_to_succeeded_p50_ms"`
}

func gangCommand(driver *ucli.StringFlag) *ucli.Command {
	return benchCommand("gang", "gangs: spread of the tasks' start times (last − first) over many runs", "", timed(benchGang),
		driver,
		&ucli.IntFlag{Name: "runs", Value: 20, Usage: "gangs to run, one after another"},
		&ucli.IntFlag{Name: "size", Value: 3, Usage: "tasks per gang (at most the node count)"},
		timeoutFlag(5*time.Minute))
}

// benchGang submits gangs of `true` one after another and reads each
// task's started_at. The spread compares the nodes' own start stamps, so
// it means what it says on one host or with synchronised clocks.
func benchGang(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	res := gangResult{Runs: c.Int("runs"), Size: c.Int("size")}
	run := benchRunID()
	var spreads, dones []time.Duration
	for i := range res.Runs {
		spec := noopSpec(run, c.String("driver"))
		spec.Gang = &httpapi.GangInput{Size: res.Size}
		t0 := time.Now()
		id, _, err := submitJob(ctx, cl, spec, "")
		if err != nil {
			return err
		}
		if _, err := cl.WaitJob(ctx, id, nil); err != nil {
			return err
		}
		d, err := jobDetail(ctx, cl, id)
		if err != nil {
			return err
		}
		dones = append(dones, time.Since(t0))
		if d.Job.State != fsm.JobSucceeded {
			return fmt.Errorf("gang %s ended %s (%s)", id, d.Job.State, d.Job.Reason)
		}
		var first, last time.Time
		for _, a := range d.Attempts {
			if a.Num < d.Job.Attempts-res.Size+1 || a.StartedAt.IsZero() {
				continue // an earlier placement
			}
			if first.IsZero() || a.StartedAt.Before(first) {
				first = a.StartedAt
			}
			if a.StartedAt.After(last) {
				last = a.StartedAt
			}
		}
		spreads = append(spreads, last.Sub(first))
		note("gang %d/%d: start spread %.1f ms", i+1, res.Runs, float64(last.Sub(first).Microseconds())/1000)
	}
	sortDurations(spreads)
	sortDurations(dones)
	res.SpreadP50MS = percentileMS(spreads, 50)
	res.SpreadMaxMS = percentileMS(spreads, 100)
	res.AllDoneP50MS = percentileMS(dones, 50)
	return printLine(c, res, "gangs of %d, %d runs: start spread p50 %.1f ms (max %.1f ms); submit → succeeded p50 %.1f ms",
		res.Size, res.Runs, res.SpreadP50MS, res.SpreadMaxMS, res.AllDoneP50MS)
}

// preemptResult is the outcome of foreman bench preempt.
type preemptResult struct {
	Runs         int     `json:"runs"`
	RunningP50MS float64 `json:"preemptor_running_p50_ms"` // submit → running, victims killed with SIGKILL
	RunningMaxMS float64 `json:"preemptor_running_max_ms"`
}

func preemptCommand(driver *ucli.StringFlag) *ucli.Command {
	return benchCommand("preempt", "preemption: a priority-90 job on a full cluster, submit → running (victims have no grace)", "", timed(benchPreempt),
		driver,
		&ucli.IntFlag{Name: "runs", Value: 5, Usage: "preemptions to time"},
		timeoutFlag(5*time.Minute))
}

// benchPreempt fills every node with one priority-10 sleep that takes the
// node's whole CPU (kill signal SIGKILL: grace 0), then submits a
// priority-90 job of the largest node's CPU and times submit → running on
// the client's clock. Everything it started is cancelled afterwards.
func benchPreempt(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	views, err := nodeViews(ctx, cl)
	if err != nil {
		return err
	}
	var biggest int64
	var alive []fsm.Node
	for _, v := range views {
		n := v.Node
		if n.Gossip == fsm.NodeAlive && n.Eligibility == fsm.Eligible {
			alive = append(alive, n)
			biggest = max(biggest, n.Capacity.CPU)
		}
	}
	if len(alive) == 0 {
		return fmt.Errorf("no alive, eligible node")
	}
	run := benchRunID()
	var started []string
	defer func() {
		for _, id := range started {
			_, _ = cl.CancelJob(context.Background(), id, "bench done")
		}
	}()
	res := preemptResult{Runs: c.Int("runs")}
	var lat []time.Duration
	for r := range res.Runs {
		var lows []string
		for _, n := range alive {
			spec := noopSpec(run, c.String("driver"))
			spec.Command = httpapi.Argv("sleep", "600")
			p := 10
			spec.Priority = &p
			spec.KillSignal = "SIGKILL"
			spec.Resources = &httpapi.ResourcesInput{CPU: httpapi.JSONString(fmt.Sprintf("%dm", n.Capacity.CPU))}
			spec.Constraints = []string{"sysnode == " + n.Name}
			if n.Labels["sysnode"] == "" {
				spec.Constraints = nil
			}
			id, _, err := submitJob(ctx, cl, spec, "")
			if err != nil {
				return err
			}
			lows = append(lows, id)
			started = append(started, id)
		}
		for _, id := range lows {
			if err := waitState(ctx, cl, id, fsm.JobRunning, true); err != nil {
				return err
			}
		}
		spec := noopSpec(run, c.String("driver"))
		spec.Command = httpapi.Argv("sleep", "600")
		p := 90
		spec.Priority = &p
		spec.KillSignal = "SIGKILL"
		spec.Resources = &httpapi.ResourcesInput{CPU: httpapi.JSONString(fmt.Sprintf("%dm", biggest))}
		t0 := time.Now()
		id, _, err := submitJob(ctx, cl, spec, "")
		if err != nil {
			return err
		}
		started = append(started, id)
		if err := waitState(ctx, cl, id, fsm.JobRunning, true); err != nil {
			return err
		}
		d := time.Since(t0)
		lat = append(lat, d)
		note("preemption %d/%d: running after %.1f ms", r+1, res.Runs, float64(d.Microseconds())/1000)
		for _, x := range append(lows, id) {
			_, _ = cl.CancelJob(ctx, x, "bench round done")
		}
		for _, x := range append(lows, id) {
			if err := waitState(ctx, cl, x, fsm.JobCancelled, false); err != nil {
				return err
			}
		}
	}
	sortDurations(lat)
	res.RunningP50MS, res.RunningMaxMS = percentileMS(lat, 50), percentileMS(lat, 100)
	return printLine(c, res, "preemptor submit → running over %d runs: p50 %.1f ms (max %.1f ms)", res.Runs, res.RunningP50MS, res.RunningMaxMS)
}

// waitState polls the job every millisecond until it is in want (with
// running: its current attempt reported running) or terminal otherwise.
func waitState(ctx context.Context, cl *api.Client, id string, want fsm.JobState, running bool) error {
	for {
		d, err := jobDetail(ctx, cl, id)
		if err != nil {
			return err
		}
		if d.Job.State == want {
			if !running {
				return nil
			}
			for _, a := range d.Attempts {
				if a.Num == d.Job.Current && a.State == fsm.AttemptRunning {
					return nil
				}
			}
		} else if d.Job.State.Terminal() {
			return fmt.Errorf("job %s ended %s (%s) waiting for %s", id, d.Job.State, d.Job.Reason, want)
		}
		if err := pause(ctx, time.Millisecond); err != nil {
			return fmt.Errorf("job %s: %w waiting for %s", id, err, want)
		}
	}
}
