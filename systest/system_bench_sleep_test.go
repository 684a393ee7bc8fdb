package systest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/foreman-sched/foreman/cli/bench"
)

// TestSystemBenchSleep runs foreman bench sleep against a dev agent: the
// client waits for the node to be ready, stays quiet until just before the
// ideal end and then lists only the run's jobs; every job must be counted
// and the wall time can never beat the ideal (one slot: the jobs run one
// after the other).
func TestSystemBenchSleep(t *testing.T) {
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
	r := runForeman(t, bin, a.url(""), "bench", "sleep", "--jobs", "3", "--duration", "300ms", "--json")
	if r.code != 0 {
		t.Fatalf("bench sleep: exit %d, stderr %q", r.code, r.stderr)
	}
	var res bench.SleepResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("bench sleep output %q: %v", r.stdout, err)
	}
	if res.Nodes != 1 || res.Slots != 1 || res.Succeeded != 3 {
		t.Fatalf("bench sleep: %+v; want 1 node, 1 slot, 3 succeeded", res)
	}
	if res.WallSeconds < res.IdealSeconds {
		t.Fatalf("bench sleep: wall %.3fs shorter than the ideal %.1fs", res.WallSeconds, res.IdealSeconds)
	}
}
