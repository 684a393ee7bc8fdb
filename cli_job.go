package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

func logsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print a job's output (the latest attempt unless --attempt)",
		ArgsUsage: "JOB_ID",
		Flags: withClientFlags(
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep streaming until the attempt ends"},
			&cli.BoolFlag{Name: "stderr", Usage: "print stderr instead of stdout"},
			&cli.IntFlag{Name: "attempt", Usage: "attempt number (default: the latest)"},
		),
		Action: func(c *cli.Context) error {
			id, err := oneArg(c, "JOB_ID")
			if err != nil {
				return cliError(err)
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			stream, out := "stdout", stdout(c)
			if c.Bool("stderr") {
				stream, out = "stderr", os.Stderr
			}
			return cliError(cl.StreamLogs(c.Context, id, stream, c.Bool("follow"), c.Int("attempt"), out))
		},
	}
}

func jobCommand() *cli.Command {
	return &cli.Command{
		Name:  "job",
		Usage: "list, inspect, cancel and retry jobs",
		Subcommands: []*cli.Command{
			{
				Name:  "ls",
				Usage: "list jobs, newest first",
				Flags: withClientFlags(
					&cli.StringFlag{Name: "state", Usage: "only jobs in this state"},
					&cli.StringSliceFlag{Name: "label", Usage: "only jobs with this k=v label (repeatable)"},
					&cli.StringFlag{Name: "name", Usage: "only jobs whose name starts with this"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "at most this many jobs (0 = all)"},
					&cli.BoolFlag{Name: "consistent", Usage: "read through the leader"},
					jsonFlag,
				),
				Action: func(c *cli.Context) error { return cliError(jobList(c)) },
			},
			{
				Name:      "status",
				Usage:     "show a job and its attempts",
				ArgsUsage: "JOB_ID",
				Flags:     withClientFlags(&cli.BoolFlag{Name: "consistent", Usage: "read through the leader"}, jsonFlag),
				Action:    func(c *cli.Context) error { return cliError(jobStatus(c)) },
			},
			{
				Name:      "cancel",
				Usage:     "cancel a job (its running attempt is killed)",
				ArgsUsage: "JOB_ID",
				Flags:     withClientFlags(&cli.StringFlag{Name: "reason", Usage: "recorded on the job"}, jsonFlag),
				Action: func(c *cli.Context) error {
					return cliError(jobChange(c, func(cl *httpapi.Client, id string) (*httpapi.JobDetail, error) {
						return cl.CancelJob(c.Context, id, c.String("reason"))
					}))
				},
			},
			{
				Name:      "retry",
				Usage:     "re-queue a failed or cancelled job with a fresh attempt budget",
				ArgsUsage: "JOB_ID",
				Flags:     withClientFlags(jsonFlag),
				Action: func(c *cli.Context) error {
					return cliError(jobChange(c, func(cl *httpapi.Client, id string) (*httpapi.JobDetail, error) {
						return cl.RetryJob(c.Context, id)
					}))
				},
			},
		},
	}
}

func jobList(c *cli.Context) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	q := httpapi.JobListQuery{
		State:      fsm.JobState(c.String("state")),
		Name:       c.String("name"),
		Consistent: c.Bool("consistent"),
	}
	for _, kv := range c.StringSlice("label") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--label %q: want key=value", kv)
		}
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		q.Labels[k] = v
	}
	limit := c.Int("limit")
	var jobs []fsm.Job
	for {
		q.Limit = 0
		if limit > 0 {
			q.Limit = min(limit-len(jobs), 1000)
		}
		page, err := cl.ListJobs(c.Context, q)
		if err != nil {
			return err
		}
		jobs = append(jobs, page.Jobs...)
		if page.NextCursor == "" || (limit > 0 && len(jobs) >= limit) {
			break
		}
		q.Cursor = page.NextCursor
	}
	if c.Bool("json") {
		return printJSON(c, map[string]any{"jobs": jobs})
	}
	now := time.Now()
	t := newTable(stdout(c), "ID", "NAME", "STATE", "PRI", "ATTEMPTS", "QUEUE", "SUBMITTED", "REASON")
	for _, j := range jobs {
		t.row(j.ID, orDash(truncate(j.Spec.Name, 40)), j.State, j.Spec.Priority,
			fmt.Sprintf("%d/%d", j.CountedAttempts, j.Spec.MaxAttempts), orDash(j.Spec.Queue),
			ago(j.SubmittedAt, now), orDash(truncate(j.Reason, 60)))
	}
	return t.flush()
}

func jobStatus(c *cli.Context) error {
	id, err := oneArg(c, "JOB_ID")
	if err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	d, err := cl.GetJob(c.Context, id, c.Bool("consistent"))
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c, d)
	}
	return printJobDetail(c, d)
}

func printJobDetail(c *cli.Context, d *httpapi.JobDetail) error {
	now := time.Now()
	j := d.Job
	kv := newTable(stdout(c))
	kv.row("ID:", j.ID)
	kv.row("Name:", orDash(j.Spec.Name))
	kv.row("State:", string(j.State)+reasonSuffix(j.Reason))
	kv.row("Command:", strings.Join(j.Spec.Command, " "))
	kv.row("Resources:", resources(j.Spec.Resources))
	kv.row("Priority:", j.Spec.Priority)
	kv.row("Attempts:", fmt.Sprintf("%d counted of %d allowed", j.CountedAttempts, j.Spec.MaxAttempts))
	if j.Spec.Queue != "" {
		kv.row("Queue:", j.Spec.Queue)
	}
	if len(j.Spec.Labels) > 0 {
		kv.row("Labels:", labels(j.Spec.Labels))
	}
	kv.row("Submitted:", j.SubmittedAt.Local().Format(time.RFC3339)+" ("+ago(j.SubmittedAt, now)+")")
	if !j.NextRunAt.IsZero() && !j.State.Terminal() {
		kv.row("Next run:", j.NextRunAt.Local().Format(time.RFC3339)+" ("+ago(j.NextRunAt, now)+")")
	}
	if !j.FinishedAt.IsZero() {
		kv.row("Finished:", j.FinishedAt.Local().Format(time.RFC3339)+" ("+ago(j.FinishedAt, now)+")")
	}
	if j.ExitCode != nil {
		kv.row("Exit code:", *j.ExitCode)
	}
	if err := kv.flush(); err != nil {
		return err
	}
	if len(d.Attempts) == 0 {
		fmt.Fprintln(stdout(c), "\nNo attempts yet.")
		return nil
	}
	fmt.Fprintln(stdout(c))
	t := newTable(stdout(c), "ATTEMPT", "NODE", "STATE", "EXIT", "REASON", "STARTED", "DURATION", "TOKEN")
	for _, a := range d.Attempts {
		dur := "-"
		if !a.StartedAt.IsZero() {
			end := a.FinishedAt
			if end.IsZero() {
				end = now
			}
			dur = roundDur(end.Sub(a.StartedAt))
		}
		reason := a.Reason
		if a.CancelRequested != "" && a.State.Live() {
			reason = "stopping: " + a.CancelRequested
		}
		t.row(a.Num, a.Node, a.State, exitCode(a.ExitCode), orDash(reason), ago(a.StartedAt, now), dur, a.FencingToken)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if last := d.Attempts[len(d.Attempts)-1]; last.StderrTail != "" && !last.State.Live() && last.State != fsm.AttemptSucceeded {
		fmt.Fprintf(stdout(c), "\nstderr tail of attempt %d:\n%s\n", last.Num, strings.TrimRight(last.StderrTail, "\n"))
	}
	return nil
}

func jobChange(c *cli.Context, fn func(*httpapi.Client, string) (*httpapi.JobDetail, error)) error {
	id, err := oneArg(c, "JOB_ID")
	if err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	d, err := fn(cl, id)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c, d)
	}
	msg := fmt.Sprintf("job %s is %s", d.Job.ID, d.Job.State)
	if d.Job.Current > 0 && len(d.Attempts) >= d.Job.Current && d.Attempts[d.Job.Current-1].CancelRequested != "" {
		msg += fmt.Sprintf("; attempt %d on %s is being stopped", d.Job.Current, d.Attempts[d.Job.Current-1].Node)
	}
	fmt.Fprintln(stdout(c), msg)
	return nil
}

// oneArg returns the single positional argument a command takes.
func oneArg(c *cli.Context, what string) (string, error) {
	if c.NArg() != 1 {
		return "", exitError(2, "%s takes exactly one %s (got %d arguments)", c.Command.FullName(), what, c.NArg())
	}
	return c.Args().First(), nil
}
