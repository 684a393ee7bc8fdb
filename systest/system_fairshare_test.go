package systest

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cli/bench"
)

// TestSystemFairShare runs fair share on three real agents (process
// driver): the README's commands set shares 3:1, a bad share is refused
// with one line and changes nothing, then `foreman bench fairshare` floods
// both namespaces with short sleep jobs and measures each one's
// slot-seconds from its attempts' started/finished times: within ±10
// points of 75/25, and the first namespace alone takes the slots both
// used once the other stops.
func TestSystemFairShare(t *testing.T) {
	c := newSysCluster(t, 3)
	lead := c.leader()
	addr := strings.TrimSuffix(lead.url(""), "/")
	cli := func(args ...string) cliResult {
		t.Helper()
		return runForeman(t, c.bin, addr, args...)
	}
	// The README's commands, as written.
	if r := cli("namespace", "set", "research", "--share", "3"); r.code != 0 || !strings.Contains(r.stdout, "share 3") {
		t.Fatalf("namespace set --share 3: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := cli("namespace", "set", "build", "--share", "1"); r.code != 0 || !strings.Contains(r.stdout, "share 1") {
		t.Fatalf("namespace set --share 1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := cli("namespace", "shares"); r.code != 0 || !strings.Contains(r.stdout, "fair share: on") || !strings.Contains(r.stdout, "research") {
		t.Fatalf("namespace shares: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r := cli("namespace", "set", "research", "--share", "0")
	if r.code == 0 || !strings.Contains(r.stderr, "share") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("namespace set --share 0: exit %d, stderr %q; want a non-zero exit and one line naming share", r.code, r.stderr)
	}
	if r := cli("namespace", "status", "research"); r.code != 0 || !strings.Contains(r.stdout, "share:       3") {
		t.Fatalf("after a refused share: exit %d, stdout %q", r.code, r.stdout)
	}

	const window, alone = 30 * time.Second, 16 * time.Second
	r = runForemanFor(t, window+alone+3*time.Minute, c.bin, addr, "bench", "fairshare", "--namespaces", "research,build", "--shares", "3:1",
		"--window", window.String(), "--warmup", "5s", "--job-time", "1s", "--per-node", "6", "--alone", alone.String(), "--json")
	if r.code != 0 {
		t.Fatalf("bench fairshare: exit %d, stderr %q", r.code, r.stderr)
	}
	var res bench.FairShareResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("bench fairshare output %q: %v", r.stdout, err)
	}
	t.Logf("bench fairshare: %+v", res)
	if res.Slots < 12 {
		t.Fatalf("%d slots: the test wants a cluster of at least 12", res.Slots)
	}
	for i := range 2 {
		if math.Abs(res.Error[i]) > 0.10 {
			t.Errorf("namespace %s (share %d): %.3f of the slot-seconds, want %.3f ± 0.10", res.Namespaces[i], res.Shares[i], res.Fraction[i], res.Target[i])
		}
	}
	// Alone, it takes what both took together: the slots the other
	// namespace held are not left idle. (Compared with the shared phase's
	// utilization, not with 1: on a loaded 2-core machine the agents do
	// not keep every slot of 1-second jobs busy whoever submits them.)
	if res.AloneOfUsed < 0.99 || res.AloneFraction < 0.9*res.Utilization {
		t.Errorf("namespace %s alone: %.3f of the cluster's slot-seconds (%.3f of those used), want at least 0.9 × %.3f (the utilization with both) and all of those used",
			res.Namespaces[0], res.AloneFraction, res.AloneOfUsed, res.Utilization)
	}
	// The view agrees the first namespace has the larger share.
	var shares struct {
		Enabled    bool `json:"enabled"`
		Namespaces []struct {
			Name       string  `json:"name"`
			Share      int64   `json:"share"`
			Normalized float64 `json:"normalized"`
		} `json:"namespaces"`
	}
	if err := getJSON(lead.url("/v1/namespaces/shares"), &shares); err != nil {
		t.Fatal(err)
	}
	byName := map[string]float64{}
	for _, n := range shares.Namespaces {
		byName[n.Name] = n.Normalized
	}
	if !shares.Enabled || byName["research"] <= byName["build"] {
		t.Fatalf("GET /v1/namespaces/shares: %+v", shares)
	}
}
