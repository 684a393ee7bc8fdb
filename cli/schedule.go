package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/httpapi"
)

// scheduleCommand is `foreman schedule create|ls|status|pause|resume|trigger|rm`.
func scheduleCommand() *ucli.Command {
	name := func(c *ucli.Context) (string, error) {
		if c.NArg() != 1 {
			return "", fmt.Errorf("want one schedule name (got %d arguments)", c.NArg())
		}
		return c.Args().First(), nil
	}
	simple := func(verb, usage string, do func(c *ucli.Context, cl *api.Client, n string) (any, error)) *ucli.Command {
		return ClientCommand(verb, usage, "NAME", func(c *ucli.Context) error {
			n, err := name(c)
			if err != nil {
				return err
			}
			return call(c, func(cl *api.Client) (any, error) { return do(c, cl, n) }, func(out any) error {
				if s, ok := out.(string); ok {
					fmt.Fprintln(Stdout(c), s)
				}
				return nil
			})
		}, JSONFlag)
	}
	return commandGroup("schedule", "cron schedules: create, list, inspect, pause, resume, trigger, remove",
		scheduleCreateCommand(),
		ClientCommand("ls", "list schedules with their next fire (in their zone and UTC) and last result", "", scheduleList, JSONFlag),
		ClientCommand("status", "one schedule and its last fires (tick, fired at, job, outcome)", "NAME", func(c *ucli.Context) error {
			n, err := name(c)
			if err == nil {
				err = scheduleStatus(c, n)
			}
			return err
		}, JSONFlag),
		simple("pause", "stop firing (ticks while paused are never caught up)", pauseSchedule(true)),
		simple("resume", "fire again from the next tick", pauseSchedule(false)),
		simple("trigger", "run the schedule's job (or workflow) once now (recorded as manual); prints its ID", func(c *ucli.Context, cl *api.Client, n string) (any, error) {
			t, err := cl.TriggerSchedule(c.Context, n)
			if err != nil {
				return nil, err
			}
			if c.Bool("json") {
				return t, nil
			}
			return t.JobID, nil
		}),
		simple("rm", "delete a schedule (the jobs it fired stay)", func(c *ucli.Context, cl *api.Client, n string) (any, error) {
			if err := cl.DeleteSchedule(c.Context, n); err != nil {
				return nil, err
			}
			if c.Bool("json") {
				return map[string]string{"deleted": n}, nil
			}
			return "", nil
		}),
	)
}

// pauseSchedule is schedule pause (paused) or resume's call.
func pauseSchedule(paused bool) func(c *ucli.Context, cl *api.Client, n string) (any, error) {
	return func(c *ucli.Context, cl *api.Client, n string) (any, error) {
		s, err := cl.PauseSchedule(c.Context, n, paused)
		if err != nil {
			return nil, err
		}
		if c.Bool("json") {
			return any(s), nil
		}
		if paused {
			return "schedule " + n + " paused", nil
		}
		return "schedule " + n + " resumed", nil
	}
}

func scheduleCreateCommand() *ucli.Command {
	flags := append(specFlags(),
		&ucli.StringFlag{Name: "cron", Usage: "cron spec: 5 fields, 6 with seconds, @daily, @every 30s"},
		&ucli.StringFlag{Name: "tz", Usage: "IANA time zone the spec is read in (default UTC)"},
		&ucli.StringFlag{Name: "overlap", Usage: "allow (default), forbid or replace while the last run is live"},
		&ucli.StringFlag{Name: "catch-up", Usage: "missed ticks: skip, latest (default) or all"},
		&ucli.IntFlag{Name: "max-catch-up", Usage: "with --catch-up all, at most this many missed ticks fire", DefaultText: "100"},
		&ucli.StringFlag{Name: "start-at", Usage: "no tick before this RFC 3339 time"},
		&ucli.StringFlag{Name: "end-at", Usage: "no tick after this RFC 3339 time"},
		&ucli.BoolFlag{Name: "paused", Usage: "create it paused"},
		JSONFlag,
	)
	return &ucli.Command{
		Name:      "create",
		Usage:     "create a schedule that submits a job at every tick",
		ArgsUsage: "NAME --cron SPEC [flags] -- CMD [ARGS...]",
		Description: "The job flags are those of submit (run-at, deadline and idempotency-key excepted).\n" +
			"-f reads a whole schedule (YAML or JSON, see testdata/schedules/); flags override its fields.",
		Flags:  WithClientFlags(flags...),
		Action: func(c *ucli.Context) error { return Error(scheduleCreate(c)) },
	}
}

func scheduleCreate(c *ucli.Context) error {
	var in httpapi.ScheduleInput
	if f := c.String("file"); f != "" {
		var err error
		if in, err = readScheduleFile(f); err != nil {
			return err
		}
	}
	args := c.Args().Slice()
	if len(args) > 0 {
		in.Name = args[0]
	}
	if in.Name == "" {
		return fmt.Errorf("no schedule name: foreman schedule create NAME --cron SPEC -- CMD")
	}
	if in.Workflow != nil {
		// A workflow template comes from the file whole; job flags and a
		// command are for job templates.
		if len(args) > 1 {
			return fmt.Errorf("%s fires a workflow: a command after -- is for a schedule that fires a job", c.String("file"))
		}
		return createSchedule(c, in)
	}
	job := httpapi.JobSpecInput{}
	if in.Job != nil {
		job = *in.Job
	}
	fileCmd := job.Command
	if err := applyFlags(c, &job, time.Now()); err != nil {
		return err
	}
	// applyFlags read every argument as the command; the first is NAME.
	switch cmd := args[min(1, len(args)):]; {
	case len(cmd) == 1 && strings.ContainsAny(cmd[0], " \t|&;<>$"):
		job.Command = httpapi.JSONString(cmd[0])
	case len(cmd) > 0:
		job.Command = httpapi.Argv(cmd...)
	default:
		job.Command = fileCmd
	}
	if len(job.Command) == 0 {
		return fmt.Errorf("no command: put it after --, e.g. foreman schedule create %s --cron @hourly -- echo hello", in.Name)
	}
	in.Job = &job
	return createSchedule(c, in)
}

// createSchedule applies the schedule flags (which override the file) and
// creates the schedule.
func createSchedule(c *ucli.Context, in httpapi.ScheduleInput) error {
	str := map[string]*string{"cron": &in.Cron, "tz": &in.TimeZone, "overlap": &in.Overlap, "catch-up": &in.CatchUp}
	for flag, dst := range str {
		if c.IsSet(flag) {
			*dst = c.String(flag)
		}
	}
	if c.IsSet("max-catch-up") {
		v := c.Int("max-catch-up")
		in.MaxCatchUp = &v
	}
	for flag, dst := range map[string]*json.RawMessage{"start-at": &in.StartAt, "end-at": &in.EndAt} {
		if c.IsSet(flag) {
			if err := rfc3339(c.String(flag), dst); err != nil {
				return fmt.Errorf("--%s: %w", flag, err)
			}
		}
	}
	if c.IsSet("paused") {
		in.Paused = c.Bool("paused")
	}
	if in.Cron == "" {
		return fmt.Errorf("--cron is required (e.g. --cron '*/5 * * * *' or --cron '@every 30s')")
	}
	// The spec goes as the flags or the file gave it: the server fills
	// the defaults and names a bad field.
	return post(c, "/v1/schedules", in, func(s *api.ScheduleInfo) error {
		fmt.Fprintf(Stdout(c), "%s: next fire %s\n", s.Spec.Name, nextFire(s))
		return nil
	})
}

// readScheduleFile reads a schedule spec (YAML or JSON; "-" is stdin),
// refusing unknown fields with the field named.
func readScheduleFile(path string) (httpapi.ScheduleInput, error) {
	var in httpapi.ScheduleInput
	b, err := readFileOrStdin(path)
	if err != nil {
		return in, err
	}
	trimmed := bytes.TrimSpace(b)
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yaml" || ext == ".yml" || len(trimmed) == 0 || trimmed[0] != '{' {
		if b, err = httpapi.YAMLToJSON(b); err != nil {
			return in, fmt.Errorf("%s: %w", path, err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "json: "))
	}
	return in, nil
}

func nextFire(s *api.ScheduleInfo) string {
	if s.NextFire == "" {
		return "never"
	}
	if s.NextFire == s.NextFireUTC {
		return s.NextFire
	}
	return s.NextFire + " (" + s.NextFireUTC + ")"
}

// lastResult is the newest fire's outcome, or why it was skipped.
func lastResult(s *api.ScheduleInfo) string {
	if len(s.Fires) == 0 {
		return "-"
	}
	f := s.Fires[len(s.Fires)-1]
	if f.JobID == "" {
		return "skipped: " + truncate(f.Skipped, 40)
	}
	if f.Workflow {
		return f.Outcome + " workflow " + f.JobID
	}
	return f.Outcome + " " + f.JobID
}

func scheduleList(c *ucli.Context) error {
	return list(c, "schedules", func(cl *api.Client) ([]api.ScheduleInfo, error) { return cl.ListSchedules(c.Context) }, []string{"NAME", "CRON", "ZONE", "NEXT FIRE", "NEXT FIRE (UTC)", "LAST RESULT", "FIRED", "SKIPPED"}, func(s api.ScheduleInfo) []any {
		next, nextUTC := orDash(s.NextFire), orDash(s.NextFireUTC)
		if s.Spec.Paused {
			next, nextUTC = "paused", "-"
		}
		return []any{s.Spec.Name, s.Spec.Cron, orDash(s.Spec.TimeZone), next, nextUTC, lastResult(&s), s.Fired, s.Skipped}
	})
}

func scheduleStatus(c *ucli.Context, name string) error {
	return call(c, func(cl *api.Client) (*api.ScheduleInfo, error) { return cl.GetSchedule(c.Context, name) }, func(reply *api.ScheduleInfo) error {
		return printSchedule(c, reply)
	})
}

// printSchedule is schedule status's text.
func printSchedule(c *ucli.Context, reply *api.ScheduleInfo) error {
	s, err := AsServer[httpapi.ScheduleInfo](reply, nil)
	if err != nil {
		return err
	}
	w := Stdout(c)
	sp := s.Spec
	zone := sp.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	fmt.Fprintf(w, "Name:       %s\nCron:       %s (%s)\nPolicies:   overlap %s, catch_up %s (max %d)\n",
		sp.Name, sp.Cron, zone, sp.Overlap, sp.CatchUp, sp.MaxCatchUp)
	state := "active"
	if sp.Paused {
		state = "paused"
	}
	if sp.Workflow != nil {
		fmt.Fprintf(w, "Fires:      workflow %s (%d jobs)\n", sp.Workflow.Name, len(sp.Workflow.Jobs))
	}
	fmt.Fprintf(w, "State:      %s, %d fired, %d skipped\nNext fire:  %s\n\n", state, s.Fired, s.Skipped, nextFire(reply))
	t := NewTable(w, "TICK", "FIRED AT", "LATE", "JOB", "OUTCOME")
	for _, f := range s.Fires {
		job, outcome := orDash(f.JobID), orDash(f.Outcome)
		if f.Workflow {
			job = "workflow " + f.JobID
		}
		if f.Manual {
			outcome += " (manual)"
		}
		if f.Skipped != "" {
			outcome = "skipped: " + f.Skipped
			if f.Count > 1 {
				outcome = fmt.Sprintf("skipped %d: %s", f.Count, f.Skipped)
			}
		}
		t.Row(f.Tick.UTC().Format(time.RFC3339), f.At.UTC().Format(time.RFC3339Nano), RoundDur(f.At.Sub(f.Tick)), job, outcome)
	}
	return t.Flush()
}
