package systest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// cliResult is one run of the foreman CLI binary.
type cliResult struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

func runForeman(t testing.TB, bin, addr string, args ...string) cliResult {
	t.Helper()
	return runForemanFor(t, cliCommandTimeout, bin, addr, args...)
}

// runForemanFor is runForeman for a command that may run up to timeout
// (a bench).
func runForemanFor(t testing.TB, timeout time.Duration, bin, addr string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "FOREMAN_ADDR="+addr)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("foreman %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("foreman %s: still running after %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), timeout, r.stdout, r.stderr)
	}
	return r
}

// TestSystemDevAgentCLI checks the README's promise with the real binary:
// `foreman agent --dev`, then submit and run from the CLI.
func TestSystemDevAgentCLI(t *testing.T) {
	bin := foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	base := freeBase(t)
	// --dev binds 127.0.0.1; --data-dir keeps its files under our temp dir.
	dir := filepath.Join(root, "dev", "data")
	a := &agentProc{name: "dev", dir: dir, base: base, bin: bin, logPath: filepath.Join(root, "dev", "dev.log"),
		args: []string{"agent", "--dev", "--port", fmt.Sprint(base), "--data-dir", dir}}
	a.start(t)
	t.Cleanup(func() {
		a.stop9()
		if t.Failed() {
			b, _ := os.ReadFile(a.logPath)
			t.Logf("--- dev log ---\n%s", tail(string(b), 6000))
		}
	})
	addr := a.url("")
	eventually(t, systemTimeout, "dev agent ready", func() error {
		var r struct{}
		return getJSON(a.url("/v1/ready"), &r)
	})
	var nodes struct {
		Nodes []struct {
			Drivers []string `json:"drivers"`
		} `json:"nodes"`
	}
	eventually(t, systemTimeout, "dev node registered", func() error {
		if err := getJSON(a.url("/v1/nodes"), &nodes); err != nil {
			return err
		}
		if len(nodes.Nodes) != 1 {
			return fmt.Errorf("%d nodes", len(nodes.Nodes))
		}
		return nil
	})
	drivers := nodes.Nodes[0].Drivers
	t.Logf("dev node drivers: %v", drivers)

	t.Run("submit", func(t *testing.T) {
		r := runForeman(t, bin, addr, "submit", "--", "echo", "hello")
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" || strings.ContainsAny(id, " \n") {
			t.Fatalf("submit: exit %d, stdout %q, stderr %q; want the job ID alone", r.code, r.stdout, r.stderr)
		}
		waitJobState(t, a, id, "succeeded")
		lr := runForeman(t, bin, addr, "logs", id)
		if lr.code != 0 || strings.TrimSpace(lr.stdout) != "hello" {
			t.Errorf("logs %s: exit %d, stdout %q, stderr %q", id, lr.code, lr.stdout, lr.stderr)
		}

		// The README's form, flags after the job ID, prints what the
		// flags-first form prints.
		readme := runForeman(t, bin, addr, "job", "status", id, "--json")
		first := runForeman(t, bin, addr, "job", "status", "--json", id)
		var st struct {
			Job struct{ ID, State string }
		}
		if readme.code != 0 || json.Unmarshal([]byte(readme.stdout), &st) != nil || st.Job.ID != id || st.Job.State != "succeeded" {
			t.Fatalf("job status %s --json: exit %d, stdout %q, stderr %q", id, readme.code, readme.stdout, readme.stderr)
		}
		if first.code != 0 || first.stdout != readme.stdout {
			t.Errorf("job status --json %s: exit %d, stdout %q; want the README form's %q", id, first.code, first.stdout, readme.stdout)
		}
		if lr := runForeman(t, bin, addr, "logs", id, "--attempt", "1"); lr.code != 0 || strings.TrimSpace(lr.stdout) != "hello" {
			t.Errorf("logs %s --attempt 1: exit %d, stdout %q, stderr %q", id, lr.code, lr.stdout, lr.stderr)
		}
		if dup := runForeman(t, bin, addr, "job", "status", id, "--json", "--json"); dup.code != 2 || strings.Count(strings.TrimSpace(dup.stderr), "\n") != 0 {
			t.Errorf("job status %s --json --json: exit %d, stderr %q; want exit 2 and one line", id, dup.code, dup.stderr)
		}
	})
	t.Run("run exit code", func(t *testing.T) {
		r := runForeman(t, bin, addr, "run", "--", "sh", "-c", "echo hello; exit 3")
		if r.code != 3 || !strings.Contains(r.stdout, "hello") {
			t.Fatalf("run: exit %d (want 3), stdout %q (want hello), stderr %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("run timeout", func(t *testing.T) {
		r := runForeman(t, bin, addr, "run", "--timeout", "2s", "--", "sleep", "60")
		t.Logf("run --timeout 2s -- sleep 60: exit %d after %.1fs; stderr %q", r.code, r.took.Seconds(), r.stderr)
		// docs/api.md: a job killed for its timeout makes run exit 124.
		if r.code != 124 || !strings.Contains(r.stdout+r.stderr, "timeout") {
			t.Fatalf("exit %d, output %q %q; want 124 and a line naming timeout", r.code, r.stdout, r.stderr)
		}
		// 2 s timeout + SIGTERM (sleep dies at once) + scheduling; far below 60 s.
		if r.took > 15*time.Second {
			t.Errorf("run --timeout 2s took %.1fs", r.took.Seconds())
		}
	})
	t.Run("container oom", func(t *testing.T) {
		requireCapability(t, slices.Contains(drivers, "container"), "the container driver (root + cgroups)")
		r := runForeman(t, bin, addr, "run", "--driver", "container", "--memory", "32MiB", "--",
			"sh", "-c", "head -c 300000000 /dev/zero | tail")
		t.Logf("oom run: exit %d after %.1fs; stderr %q", r.code, r.took.Seconds(), r.stderr)
		if r.code != 137 || !strings.Contains(r.stdout+r.stderr, "oom") {
			t.Fatalf("exit %d, output %q %q; want 137 and a line naming oom", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("bench counts its own jobs", func(t *testing.T) {
		// Jobs of someone else, older and newer than the run, must not count.
		if r := runForeman(t, bin, addr, "submit", "--in", "1h", "--", "true"); r.code != 0 {
			t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
		}
		r := runForeman(t, bin, addr, "bench", "throughput", "--jobs", "12", "--batch", "5", "--json")
		if r.code != 0 {
			t.Fatalf("bench throughput: exit %d: %s", r.code, r.stderr)
		}
		var res struct {
			Jobs, Succeeded, Failed int
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("bench throughput --json: %v: %q", err, r.stdout)
		}
		if res.Jobs != 12 || res.Succeeded != 12 || res.Failed != 0 {
			t.Fatalf("bench throughput = %+v, want 12 jobs, 12 succeeded", res)
		}
	})
}
