package systest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/httpapi"
)

// The schedule commands on a real agent: create (flags and -f), refusals
// with one line and a non-zero exit, ls, status --json with fired jobs
// and their outcomes, trigger, pause and resume (a line; --json: the
// schedule), rm.
func TestSystemScheduleCLI(t *testing.T) {
	c := newSysCluster(t, 1)
	a := c.leader()
	bin, addr := c.bin, a.url("")
	run := func(args ...string) cliResult {
		t.Helper()
		return runForeman(t, bin, addr, args...)
	}
	ok := func(args ...string) string {
		t.Helper()
		r := run(args...)
		if r.code != 0 {
			t.Fatalf("foreman %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	ok("schedule", "create", "tick", "--cron", "@every 1s", "--catch-up", "all", "--driver", "process",
		"--", "sh", "-c", `test "$FOREMAN_SCHEDULE" = tick && test -n "$FOREMAN_SCHEDULED_TIME"`)
	ok("schedule", "create", "-f", "testdata/schedules/nightly-backup.yaml")
	for _, bad := range [][]string{
		{"schedule", "create", "x", "--cron", "61 * * * *", "--", "true"},
		{"schedule", "create", "x", "--cron", "@daily", "--tz", "Mars/Base", "--", "true"},
		{"schedule", "create", "x", "--cron", "@every 500ms", "--", "true"},
		{"schedule", "create", "x", "--cron", "@daily", "--overlap", "sometimes", "--", "true"},
		{"schedule", "create", "tick", "--cron", "@daily", "--", "true"},
	} {
		r := run(bad...)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("foreman %s: exit %d, stderr %q; want one line and a non-zero exit", strings.Join(bad, " "), r.code, r.stderr)
		}
	}
	var info httpapi.ScheduleInfo
	eventually(t, systemTimeout, "two fires succeeded", func() error {
		if err := json.Unmarshal([]byte(ok("schedule", "status", "tick", "--json")), &info); err != nil {
			return err
		}
		n := 0
		for _, f := range info.Fires {
			if f.Outcome == "succeeded" {
				n++
			}
		}
		if n < 2 {
			return fmt.Errorf("%d succeeded of %d fires", n, len(info.Fires))
		}
		return nil
	})
	if id := strings.TrimSpace(ok("schedule", "trigger", "nightly-backup")); id == "" {
		t.Fatal("trigger printed no job ID")
	}
	if out := ok("schedule", "pause", "tick"); strings.TrimSpace(out) != "schedule tick paused" {
		t.Errorf("schedule pause printed %q, want \"schedule tick paused\"", out)
	}
	ls := ok("schedule", "ls")
	if !strings.Contains(ls, "nightly-backup") || !strings.Contains(ls, "Europe/Berlin") || !strings.Contains(ls, "paused") {
		t.Errorf("schedule ls:\n%s", ls)
	}
	if out := ok("schedule", "resume", "tick"); strings.TrimSpace(out) != "schedule tick resumed" {
		t.Errorf("schedule resume printed %q, want \"schedule tick resumed\"", out)
	}
	// --json prints the schedule, as status --json does.
	var paused httpapi.ScheduleInfo
	if out := ok("schedule", "pause", "tick", "--json"); json.Unmarshal([]byte(out), &paused) != nil || !paused.Spec.Paused || paused.Spec.Name != "tick" {
		t.Errorf("schedule pause --json printed %q, want the paused schedule", out)
	}
	status := ok("schedule", "status", "tick")
	if !strings.Contains(status, "succeeded") || !strings.Contains(status, "TICK") {
		t.Errorf("schedule status:\n%s", status)
	}
	ok("schedule", "rm", "tick")
	if r := run("schedule", "status", "tick"); r.code == 0 {
		t.Errorf("status of a removed schedule: exit 0")
	}
}
