package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

func logsCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "logs",
		Usage:     "print a job's output (the latest attempt unless --attempt)",
		ArgsUsage: "JOB_ID",
		Flags: WithClientFlags(
			&ucli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep streaming until the attempt ends"},
			&ucli.BoolFlag{Name: "stderr", Usage: "print stderr instead of stdout"},
			&ucli.IntFlag{Name: "attempt", Usage: "attempt number (default: the latest)"},
			&ucli.IntFlag{Name: "index", Usage: "of an array job: the task at this index"},
		),
		Action: func(c *ucli.Context) error {
			id, err := oneArg(c, "JOB_ID")
			if err != nil {
				return Error(err)
			}
			if c.IsSet("index") {
				id = fsm.TaskID(id, c.Int("index"))
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			stream, out := "stdout", Stdout(c)
			if c.Bool("stderr") {
				stream, out = "stderr", os.Stderr
			}
			return Error(cl.Logs(c.Context, id, api.LogQuery{Stream: stream, Follow: c.Bool("follow"), Attempt: c.Int("attempt")}, out))
		},
	}
}

func jobCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "job",
		Usage: "list, inspect, cancel and retry jobs",
		Subcommands: []*ucli.Command{
			{
				Name:  "ls",
				Usage: "list jobs, newest first",
				Flags: WithClientFlags(
					&ucli.StringFlag{Name: "state", Usage: "only jobs in this state (or preempted: jobs that had an attempt preempted)"},
					&ucli.StringSliceFlag{Name: "label", Usage: "only jobs with this k=v label (repeatable)"},
					&ucli.StringFlag{Name: "name", Usage: "only jobs whose name starts with this"},
					&ucli.StringFlag{Name: "queue", Usage: "only jobs of this queue"},
					&ucli.StringFlag{Name: "array", Usage: "the tasks of this array job (else an array is listed as one job)"},
					&ucli.IntFlag{Name: "limit", Value: 50, Usage: "at most this many jobs (0 = all)"},
					ConsistentFlag,
					JSONFlag,
				),
				Action: func(c *ucli.Context) error { return Error(jobList(c)) },
			},
			{
				Name:   "counts",
				Usage:  "how many jobs are in each state",
				Flags:  WithClientFlags(JSONFlag),
				Action: func(c *ucli.Context) error { return Error(jobCounts(c)) },
			},
			{
				Name:      "status",
				Usage:     "show a job and its attempts",
				ArgsUsage: "JOB_ID",
				Flags:     WithClientFlags(ConsistentFlag, JSONFlag),
				Action:    func(c *ucli.Context) error { return Error(jobStatus(c)) },
			},
			{
				Name:      "tasks",
				Usage:     "show a gang's tasks: each task's latest attempt and budget",
				ArgsUsage: "JOB_ID",
				Flags:     WithClientFlags(JSONFlag),
				Action:    func(c *ucli.Context) error { return Error(jobTasks(c)) },
			},
			{
				Name:      "checkpoint",
				Usage:     "store a job's checkpoint (up to 1 MiB, kept in raft) with -f FILE (- for stdin), or print it",
				ArgsUsage: "JOB_ID",
				Flags:     WithClientFlags(&ucli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "file to store as the checkpoint (- = stdin; empty file clears it)"}, JSONFlag),
				Action:    func(c *ucli.Context) error { return Error(jobCheckpoint(c)) },
			},
			{
				Name:      "cancel",
				Usage:     "cancel a job (its running attempt is killed; an array's live tasks, and no more are made)",
				ArgsUsage: "JOB_ID",
				Flags:     WithClientFlags(&ucli.StringFlag{Name: "reason", Usage: "recorded on the job"}, indexesFlag, JSONFlag),
				Action: func(c *ucli.Context) error {
					return Error(jobChange(c, func(cl *api.Client, id string) (*api.JobDetail, error) {
						if c.IsSet("indexes") {
							return cl.CancelIndexes(c.Context, id, c.String("indexes"), c.String("reason"))
						}
						return cl.CancelJob(c.Context, id, c.String("reason"))
					}))
				},
			},
			{
				Name:      "retry",
				Usage:     "re-queue a failed or cancelled job with a fresh attempt budget (an array: every task that did not succeed)",
				ArgsUsage: "JOB_ID",
				Flags:     WithClientFlags(indexesFlag, JSONFlag),
				Action: func(c *ucli.Context) error {
					return Error(jobChange(c, func(cl *api.Client, id string) (*api.JobDetail, error) {
						if c.IsSet("indexes") {
							return cl.RetryIndexes(c.Context, id, c.String("indexes"))
						}
						return cl.RetryJob(c.Context, id)
					}))
				},
			},
		},
	}
}

// indexesFlag picks some tasks of an array job.
var indexesFlag = &ucli.StringFlag{Name: "indexes", Usage: "of an array job: only these tasks, e.g. 3,7-9"}

func jobCounts(c *ucli.Context) error {
	return call(c, func(cl *api.Client) (*api.JobCounts, error) { return cl.JobCounts(c.Context) }, func(out *api.JobCounts) error {
		w := NewTable(Stdout(c), "STATE", "JOBS")
		for _, st := range fsm.AllStates {
			w.Row(st, out.Counts[api.JobState(st)])
		}
		w.Row("total", out.Total)
		return w.Flush()
	})
}

func jobList(c *ucli.Context) error {
	cl, err := readClient(c)
	if err != nil {
		return err
	}
	q := api.JobQuery{
		State: api.JobState(c.String("state")),
		Name:  c.String("name"),
		Queue: c.String("queue"),
		Array: c.String("array"),
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
	return printPages(c, "jobs", func(n int, cursor string) ([]api.Job, string, error) {
		q.Limit, q.Cursor = n, cursor
		page, err := cl.ListJobs(c.Context, q)
		if err != nil {
			return nil, "", err
		}
		return page.Jobs, page.NextCursor, nil
	}, []string{"ID", "NAME", "STATE", "PRI", "ATTEMPTS", "QUEUE", "SUBMITTED", "REASON"}, func(j api.Job, now time.Time) []any {
		return []any{j.ID, orDash(truncate(j.Spec.Name, 40)), jobStateCell(j), intOr0(j.Spec.Priority),
			fmt.Sprintf("%d/%d", j.CountedAttempts, intOr0(j.Spec.MaxAttempts)), orDash(j.Spec.Queue),
			ago(j.SubmittedAt, now), orDash(truncate(j.Reason, 60))}
	})
}

func jobStatus(c *ucli.Context) error {
	id, cl, err := argClient(c, "JOB_ID", readClient)
	if err != nil {
		return err
	}
	reply, err := cl.GetJob(c.Context, id)
	if err != nil {
		return err
	}
	d, err := AsServer[httpapi.JobDetail](reply, nil)
	if err != nil {
		return err
	}
	usage, failed := jobGPUUsage(c, cl, d)
	if c.Bool("json") {
		if len(usage) > 0 {
			// The live GPU use rides along (gpu_usage); it is the nodes', not the job record's.
			return PrintJSON(c, struct {
				*api.JobDetail
				GPUUsage []api.JobGPUUsage `json:"gpu_usage"`
			}{reply, usage})
		}
		return PrintJSON(c, reply)
	}
	if err := printJobDetail(c, d); err != nil {
		return err
	}
	if err := printGPUUsage(c, usage, failed); err != nil {
		return err
	}
	// An agent older than timelines answers 404: no section then.
	if evs, err := cl.JobEvents(c.Context, id); err == nil && len(evs) > 0 {
		fmt.Fprintln(Stdout(c), "\nTIMELINE")
		t := NewTable(Stdout(c), "TIME", "EVENT", "ATTEMPT", "NODE", "REASON")
		for _, e := range evs {
			att := "-"
			if e.Attempt > 0 {
				att = fmt.Sprint(e.Attempt)
			}
			t.Row(e.At.Local().Format("15:04:05.000"), e.Type, att, orDash(e.Node), orDash(e.Reason))
		}
		return t.Flush()
	}
	return nil
}

func printJobDetail(c *ucli.Context, d *httpapi.JobDetail) error {
	now := time.Now()
	j := d.Job
	kv := NewTable(Stdout(c))
	kv.Row("ID:", j.ID)
	kv.Row("Name:", orDash(j.Spec.Name))
	kv.Row("Namespace:", fsm.NamespaceOf(j.Spec.Namespace))
	kv.Row("State:", string(j.State)+reasonSuffix(j.Reason))
	if j.Spec.HTTP != nil {
		kv.Row("Request:", requestLine(j.Spec.HTTP))
	} else {
		kv.Row("Command:", strings.Join(j.Spec.Command, " "))
	}
	kv.Row("Resources:", resources(j.Spec.Resources))
	kv.Row("Priority:", j.Spec.Priority)
	kv.Row("Attempts:", fmt.Sprintf("%d counted of %d allowed", j.CountedAttempts, j.Spec.MaxAttempts))
	if g := j.Spec.Gang; g != nil {
		kv.Row("Gang:", gangLine(&j))
	}
	if j.Array != nil && j.Spec.Array != nil {
		kv.Row("Array:", arrayLine(j.Spec.Array, j.Array))
		for _, r := range arrayIndexRows(d.Array) {
			kv.Row(r[0], r[1])
		}
	}
	if t := j.ArrayTask; t != nil {
		kv.Row("Array task:", fmt.Sprintf("index %d of %s", t.Index, t.Array))
	}
	if len(j.Spec.DependsOn) > 0 {
		kv.Row("Depends on:", depsLine(j.Spec.DependsOn, j.Spec.After, string(j.Spec.Condition), j.Deps))
	}
	if j.Preemptions > 0 {
		kv.Row("Preempted:", fmt.Sprintf("%d times", j.Preemptions))
	}
	if j.Spec.Queue != "" {
		kv.Row("Queue:", j.Spec.Queue)
	}
	if len(j.Spec.Labels) > 0 {
		kv.Row("Labels:", labels(j.Spec.Labels))
	}
	kv.Row("Submitted:", j.SubmittedAt.Local().Format(time.RFC3339)+" ("+ago(j.SubmittedAt, now)+")")
	if !j.NextRunAt.IsZero() && !j.State.Terminal() {
		kv.Row("Next run:", j.NextRunAt.Local().Format(time.RFC3339)+" ("+ago(j.NextRunAt, now)+")")
	}
	if !j.FinishedAt.IsZero() {
		kv.Row("Finished:", j.FinishedAt.Local().Format(time.RFC3339)+" ("+ago(j.FinishedAt, now)+")")
	}
	if j.ExitCode != nil {
		kv.Row("Exit code:", *j.ExitCode)
	}
	if err := kv.Flush(); err != nil {
		return err
	}
	if j.Array != nil {
		fmt.Fprintf(Stdout(c), "\nTasks: foreman job ls --array %s; one task's output: foreman logs %s --index N\n", j.ID, j.ID)
		return printDeliveries(Stdout(c), d.Deliveries, now)
	}
	if len(d.Attempts) == 0 {
		fmt.Fprintln(Stdout(c), "\nNo attempts yet.")
		return printDeliveries(Stdout(c), d.Deliveries, now)
	}
	fmt.Fprintln(Stdout(c))
	gang := j.Spec.Gang != nil
	gpus := false
	for _, a := range d.Attempts {
		gpus = gpus || len(a.GPUs) > 0 || a.GPUShare != nil
	}
	cols := []string{"ATTEMPT", "NODE", "STATE", "EXIT", "REASON", "STARTED", "DURATION", "TOKEN"}
	if gang {
		cols = append([]string{"TASK"}, cols...)
	}
	if gpus {
		cols = append(cols, "GPUS")
	}
	t := NewTable(Stdout(c), cols...)
	for _, a := range d.Attempts {
		dur := "-"
		if !a.StartedAt.IsZero() {
			end := a.FinishedAt
			if end.IsZero() {
				end = now
			}
			dur = RoundDur(end.Sub(a.StartedAt))
		}
		reason := a.Reason
		if a.CancelRequested != "" && a.State.Live() {
			reason = "stopping: " + a.CancelRequested
		}
		row := []any{a.Num, a.Node, a.State, exitCode(a.ExitCode), orDash(reason), ago(a.StartedAt, now), dur, a.FencingToken}
		if gang {
			task := "-"
			if a.Task != nil {
				task = fmt.Sprint(a.Task.Index)
			}
			row = append([]any{task}, row...)
		}
		if gpus {
			row = append(row, attemptGPUColumn(a))
		}
		t.Row(row...)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if last := d.Attempts[len(d.Attempts)-1]; len(last.Artifacts) > 0 {
		var bytes int64
		for _, a := range last.Artifacts {
			bytes += a.Size
		}
		fmt.Fprintf(Stdout(c), "\nArtifacts of attempt %d: %d files, %d bytes on node %s (foreman artifacts ls %s)\n", last.Num, len(last.Artifacts), bytes, last.Node, d.Job.ID)
	}
	if last := d.Attempts[len(d.Attempts)-1]; last.Outputs != nil {
		fmt.Fprintf(Stdout(c), "Outputs of attempt %d (artifacts, logs): %s\n", last.Num, outputsWhere(&last))
	}
	if last := d.Attempts[len(d.Attempts)-1]; last.StderrTail != "" && !last.State.Live() && last.State != fsm.AttemptSucceeded {
		fmt.Fprintf(Stdout(c), "\nstderr tail of attempt %d:\n%s\n", last.Num, strings.TrimRight(last.StderrTail, "\n"))
	}
	return printDeliveries(Stdout(c), d.Deliveries, now)
}

func jobChange(c *ucli.Context, fn func(*api.Client, string) (*api.JobDetail, error)) error {
	return change(c, "JOB_ID", fn, func(d *api.JobDetail) (string, error) {
		msg := fmt.Sprintf("job %s is %s", d.Job.ID, d.Job.State)
		if cur := d.Job.CurrentAttempt; cur > 0 && len(d.Attempts) >= cur && d.Attempts[cur-1].CancelRequested != "" {
			msg += fmt.Sprintf("; attempt %d on %s is being stopped", cur, d.Attempts[cur-1].Node)
		}
		return msg, nil
	})
}

// oneArg returns the single positional argument a command takes.
func oneArg(c *ucli.Context, what string) (string, error) {
	if c.NArg() != 1 {
		return "", Exitf(2, "%s takes exactly one %s (got %d arguments)", c.Command.FullName(), what, c.NArg())
	}
	return c.Args().First(), nil
}

// gangLine summarises a gang job: "3 tasks on distinct nodes; placement 2
// (token 41), 3 live".
func gangLine(j *fsm.Job) string {
	g := j.Spec.Gang
	s := fmt.Sprintf("%d tasks", g.Size)
	if g.SpreadTasks() {
		s += " on distinct nodes"
	} else {
		s += " (may share nodes)"
	}
	if st := j.Gang; st != nil && st.Placements > 0 {
		s += fmt.Sprintf("; placement %d (token %d), %d live", st.Placements, st.Token, st.Live)
		if st.Stop != "" && st.Live > 0 {
			s += ", stopping: " + st.Stop
		}
	}
	return s
}

func jobTasks(c *ucli.Context) error {
	return show(c, "JOB_ID", func(cl *api.Client, id string) (*api.TaskList, error) { return cl.JobTasks(c.Context, id) },
		func(tl *httpapi.TaskList) error { return printTasks(c, tl) })
}

// printTasks is job tasks' table.
func printTasks(c *ucli.Context, tl *httpapi.TaskList) error {
	t := NewTable(Stdout(c), "TASK", "ATTEMPT", "NODE", "STATE", "PORT", "COUNTED", "REASON")
	for _, ts := range tl.Tasks {
		a := ts.Latest
		if a == nil {
			t.Row(ts.Index, "-", "-", "-", "-", ts.Counted, "-")
			continue
		}
		reason := a.Reason
		if a.CancelRequested != "" && a.State.Live() {
			reason = "stopping: " + a.CancelRequested
		}
		t.Row(ts.Index, a.Num, a.Node, a.State, a.Task.Port, ts.Counted, orDash(reason))
	}
	return t.Flush()
}

func jobCheckpoint(c *ucli.Context) error {
	id, cl, err := argClient(c, "JOB_ID", newClient)
	if err != nil {
		return err
	}
	if !c.IsSet("file") {
		b, err := cl.Checkpoint(c.Context, id)
		if err != nil {
			return err
		}
		_, err = Stdout(c).Write(b)
		return err
	}
	var data []byte
	if f := c.String("file"); f == "-" {
		data, err = io.ReadAll(io.LimitReader(os.Stdin, api.CheckpointMax+1))
	} else {
		data, err = os.ReadFile(f)
	}
	if err != nil {
		return err
	}
	info, err := cl.PutCheckpoint(c.Context, id, data)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return PrintJSON(c, info)
	}
	fmt.Fprintf(Stdout(c), "checkpoint of %s: %d bytes\n", info.JobID, info.Bytes)
	return nil
}

// outputsWhere says where an attempt's artifacts and logs are: on its
// node while the upload to the object store is pending, then in the store.
func outputsWhere(a *fsm.Attempt) string {
	o := a.Outputs
	switch o.State {
	case fsm.OutputsPending:
		return fmt.Sprintf("on node %s only; upload to %s pending", a.Node, o.Store)
	case fsm.OutputsPartial:
		return fmt.Sprintf("in %s (%d objects) except %s, which stay on node %s only: %s", o.Store, len(o.Objects), strings.Join(o.NotStored, ", "), a.Node, o.Error)
	}
	return fmt.Sprintf("in %s (%d objects) and on node %s", o.Store, len(o.Objects), a.Node)
}
