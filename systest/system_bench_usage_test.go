package systest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/cli/bench"
)

// TestSystemBenchUsage runs foreman bench usage against a dev agent: bad
// flags are refused in one line before any job is submitted; a run
// counts its jobs' attempts in the usage report exactly (verified) and
// times the reports.
func TestSystemBenchUsage(t *testing.T) {
	bin := foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	base := freeBase(t)
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
	eventually(t, systemTimeout, "dev node registered", func() error {
		var nodes struct {
			Nodes []struct{} `json:"nodes"`
		}
		if err := getJSON(a.url("/v1/nodes"), &nodes); err != nil {
			return err
		}
		if len(nodes.Nodes) != 1 {
			return fmt.Errorf("%d nodes", len(nodes.Nodes))
		}
		return nil
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "yesterday"}, "since"},
		{[]string{"--jobs", "0"}, "--jobs"},
		{[]string{"--queries", "0"}, "--queries"},
	} {
		r := runForeman(t, bin, a.url(""), append([]string{"bench", "usage"}, tc.args...)...)
		if msg := strings.TrimSpace(r.stderr); r.code == 0 || strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
			t.Fatalf("bench usage %q: exit %d, stderr %q; want non-zero and one line naming %s", tc.args, r.code, r.stderr, tc.want)
		}
	}
	var jobs struct {
		Jobs []struct{} `json:"jobs"`
	}
	if err := getJSON(a.url("/v1/jobs"), &jobs); err != nil || len(jobs.Jobs) != 0 {
		t.Fatalf("after refused runs: %d jobs (%v), want none", len(jobs.Jobs), err)
	}

	r := runForeman(t, bin, a.url(""), "bench", "usage", "--jobs", "6", "--batch", "4", "--queries", "5", "--json")
	if r.code != 0 {
		t.Fatalf("bench usage: exit %d, stderr %q", r.code, r.stderr)
	}
	var res bench.UsageResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("bench usage output %q: %v", r.stdout, err)
	}
	if !res.Verified || res.JobAttempts != 6 || res.UsageAttempts != 6 || res.Rows != 1 || res.Queries != 5 || res.P50MS <= 0 || res.MaxMS < res.P99MS {
		t.Fatalf("bench usage: %+v; want 6 attempts counted both ways, verified, 1 row, 5 timed queries", res)
	}
}
