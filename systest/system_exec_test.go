package systest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// `foreman exec` on three real agents with --acl: into a container job
// through every agent (the attempt's own node and the others, which proxy
// the upgrade), the command sees the job's files, processes, directory and
// environment, its exit code comes back, and the job keeps running after
// it; beside a process job in its directory and environment; a submit
// token is refused (403 naming exec), an exec token works; exec into a
// finished job is refused naming its state.
func TestSystemExec(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	bin, _, agents, mgmt := newACLCluster(t)
	at := func(a *agentProc, token string) func(args ...string) cliResult {
		return func(args ...string) cliResult {
			return runForemanAs(t, bin, a.url(""), token, "", args...)
		}
	}
	token := func(role string) string {
		t.Helper()
		r := at(agents[0], mgmt)("acl", "token", "create", "--role", role, "--name", role, "--json")
		var tok struct{ Secret string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tok) != nil {
			t.Fatalf("token create %s: %d %s %s", role, r.code, r.stdout, r.stderr)
		}
		return tok.Secret
	}
	submitTok, execTok := token("submit:*"), token("exec:*")
	byName := map[string]*agentProc{}
	for _, a := range agents {
		byName[a.name] = a
	}
	// running submits a job with the submit token and waits until its
	// attempt runs; it returns the job ID and the attempt's node.
	running := func(args ...string) (string, string) {
		t.Helper()
		r := at(agents[1], submitTok)(append([]string{"submit"}, args...)...)
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("submit %v: %d %s", args, r.code, r.stderr)
		}
		var node string
		eventually(t, systemTimeout, "job "+id+" running", func() error {
			var j jobView
			if err := getJSONToken(agents[0].url("/v1/jobs/"+id), mgmt, &j); err != nil {
				return err
			}
			if a := j.latest(); a == nil || a.State != "running" {
				return fmt.Errorf("job %s", j.String())
			}
			node = j.latest().Node
			return nil
		})
		return id, node
	}

	t.Run("container", func(t *testing.T) {
		var node struct{ Drivers []string }
		if err := getJSONToken(agents[0].url("/v1/nodes/"+agents[0].name), mgmt, &node); err != nil {
			t.Fatal(err)
		}
		requireCapability(t, slices.Contains(node.Drivers, "container"), "the container driver (root + cgroups)")
		id, on := running("--driver", "container", "--", "sh", "-c", "echo job-data > /task/data.txt; exec sleep 300")
		// The job's file, its sleep among the container's processes (its
		// own pid namespace: few pids), its directory and environment.
		script := `cat /task/data.txt; for p in /proc/[0-9]*; do cat $p/comm; done | sort | tr '\n' ' '; echo; pwd; echo "$FOREMAN_JOB_ID"; exit 3`
		for _, a := range agents {
			r := at(a, execTok)("exec", id, "--", "sh", "-c", script)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != 3 || len(lines) != 4 || lines[0] != "job-data" || !strings.Contains(lines[1], "sleep") || lines[2] != "/task" || lines[3] != id {
				t.Fatalf("exec via %s (attempt on %s): exit %d, stdout %q, stderr %q; want exit 3, the job's file, its sleep, /task and its ID", a.name, on, r.code, r.stdout, r.stderr)
			}
			if procs := strings.Fields(lines[1]); len(procs) > 8 {
				t.Errorf("exec via %s sees %d processes (%v): not the job's pid namespace", a.name, len(procs), procs)
			}
		}
		// -t: a terminal in the container; flags after the job ID.
		if r := at(agents[2], execTok)("exec", id, "-t", "--", "tty"); r.code != 0 || !strings.HasPrefix(r.stdout, "/dev/pts/") {
			t.Errorf("exec -t tty: exit %d, %q %q", r.code, r.stdout, r.stderr)
		}
		// -i: stdin reaches the command.
		r := runForemanAs(t, bin, byName[on].url(""), execTok, "hello\n", "exec", "-i", id, "--", "tr", "a-z", "A-Z")
		if r.code != 0 || r.stdout != "HELLO\n" {
			t.Errorf("exec -i: exit %d, %q %q", r.code, r.stdout, r.stderr)
		}
		// A submit token cannot exec.
		if r := at(agents[1], submitTok)("exec", id, "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "needs the exec permission") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("exec with a submit token: exit %d, %q; want one line naming the exec permission", r.code, r.stderr)
		}
		// Every exec is an event of the job's timeline naming who ran what,
		// once each, whichever node took it (five ran; the refused one is
		// not one).
		var tl struct {
			Events []struct {
				Type, Reason string
				Attempt      int
			}
		}
		if err := getJSONToken(agents[0].url("/v1/jobs/"+id+"/events"), mgmt, &tl); err != nil {
			t.Fatal(err)
		}
		var execs []string
		for _, e := range tl.Events {
			if e.Type == "attempt.exec" {
				execs = append(execs, e.Reason)
			}
		}
		if len(execs) != 5 || execs[0] != "exec:* ran sh with 2 argument(s)" || execs[3] != "exec:* ran tty on a terminal" {
			t.Errorf("exec events in the timeline: %q; want 5, naming the token and the command", execs)
		}
		// The job kept running through all of it.
		var j jobView
		if err := getJSONToken(agents[0].url("/v1/jobs/"+id), mgmt, &j); err != nil || j.Job.State != "running" || j.latest().State != "running" {
			t.Fatalf("after the execs: %v %s, want the job still running", err, j.String())
		}
		if r := at(agents[0], submitTok)("job", "cancel", id); r.code != 0 {
			t.Fatalf("cancel: %d %s", r.code, r.stderr)
		}
		waitJobStateToken(t, agents[0], mgmt, id, "cancelled")
		r = at(agents[1], execTok)("exec", id, "--", "true")
		if r.code == 0 || !strings.Contains(r.stderr, "is cancelled: nothing to exec into") {
			t.Errorf("exec into a cancelled job: exit %d, %q", r.code, r.stderr)
		}
	})

	t.Run("a gang's task", func(t *testing.T) {
		r := at(agents[1], submitTok)("submit", "--gang", "2", "--driver", "process", "--", "sleep", "300")
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("submit --gang 2: %d %s", r.code, r.stderr)
		}
		for task := range 2 {
			eventually(t, systemTimeout, "exec into task "+fmt.Sprint(task), func() error {
				r := at(agents[2], execTok)("exec", id, "--task", fmt.Sprint(task), "--", "sh", "-c", `echo "$GANG_INDEX"`)
				if r.code != 0 || strings.TrimSpace(r.stdout) != fmt.Sprint(task) {
					return fmt.Errorf("exit %d, %q %q", r.code, r.stdout, r.stderr)
				}
				return nil
			})
		}
		if r := at(agents[2], execTok)("exec", id, "--task", "2", "--", "true"); r.code != 2 || !strings.Contains(r.stderr, "has tasks 0-1") {
			t.Errorf("exec --task 2 into a gang of 2: exit %d, %q", r.code, r.stderr)
		}
		at(agents[0], submitTok)("job", "cancel", id)
	})

	t.Run("process", func(t *testing.T) {
		id, on := running("--driver", "process", "--env", "MARK=m1", "--", "sh", "-c", "echo proc-data > data.txt; exec sleep 300")
		for _, a := range agents {
			r := at(a, execTok)("exec", id, "--", "sh", "-c", `cat data.txt; pwd; echo "$MARK $FOREMAN_JOB_ID"; exit 4`)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != 4 || len(lines) != 3 || lines[0] != "proc-data" || !strings.HasSuffix(lines[1], "/"+id+"-1/task") || lines[2] != "m1 "+id {
				t.Fatalf("exec via %s (attempt on %s): exit %d, %q %q", a.name, on, r.code, r.stdout, r.stderr)
			}
		}
		var j jobView
		if err := getJSONToken(agents[0].url("/v1/jobs/"+id), mgmt, &j); err != nil || j.Job.State != "running" {
			t.Fatalf("after the execs: %v %s, want the job still running", err, j.String())
		}
		if r := at(agents[0], submitTok)("job", "cancel", id); r.code != 0 {
			t.Fatalf("cancel: %d %s", r.code, r.stderr)
		}
	})
}

// waitJobStateToken is waitJobState under ACL.
func waitJobStateToken(t *testing.T, a *agentProc, token, id, want string) {
	t.Helper()
	eventually(t, systemTimeout, "job "+id+" "+want, func() error {
		var j jobView
		if err := getJSONToken(a.url("/v1/jobs/"+id), token, &j); err != nil {
			return err
		}
		if j.Job.State != want {
			return fmt.Errorf("job %s", j.String())
		}
		return nil
	})
}

// runForemanAs is runForeman with FOREMAN_TOKEN and stdin.
func runForemanAs(t testing.TB, bin, addr, token, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "FOREMAN_ADDR="+addr, "FOREMAN_TOKEN="+token)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("foreman %s: %v", strings.Join(args, " "), err)
	}
	return r
}
