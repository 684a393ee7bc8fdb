package jepsen

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/jepsen/netns"
	"github.com/foreman-sched/foreman/jepsen/report"
)

// requireRealTier fails under CI=true and skips loudly elsewhere when the
// machine cannot run agents in namespaces.
func requireRealTier(t *testing.T) {
	t.Helper()
	if err := netns.Check(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("jepsen real tier cannot run: %v", err)
		}
		t.Skipf("SKIPPING jepsen real tier: %v (set up root + iproute2 + iptables to run it)", err)
	}
}

// binary returns $FOREMAN_BIN or builds the module's binary into a temp dir,
// with the clock hook (-tags jepsenclock) the clock nemesis needs.
func binary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("FOREMAN_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	return buildClockBinary(t)
}

func resultsDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("FOREMAN_JEPSEN_RESULTS")
	if base == "" {
		base = "results"
	}
	dir, err := filepath.Abs(filepath.Join(base, time.Now().Format("20060102-150405")))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// clockBinary is the binary for clock scenarios: $FOREMAN_JEPSEN_CLOCK_BIN
// (built with -tags jepsenclock) when set; bin when the test built it
// (with the tag); else one built with the tag (make test passes a normal
// FOREMAN_BIN).
func clockBinary(t *testing.T, bin string) string {
	if b := os.Getenv("FOREMAN_JEPSEN_CLOCK_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	if os.Getenv("FOREMAN_BIN") == "" {
		return bin
	}
	return buildClockBinary(t)
}

// buildClockBinary builds the module's binary with the clock hook.
func buildClockBinary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "foreman-jepsen")
	cmd := exec.Command("go", "build", "-tags", "netgo osusergo jepsenclock", "-o", out, ".")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building foreman with the clock hook: %v\n%s", err, b)
	}
	return out
}

func runMatrix(t *testing.T, matrix []Scenario) {
	requireRealTier(t)
	bin := binary(t)
	dir := resultsDir(t)
	var sums []report.Summary
	for _, sc := range matrix {
		ok := t.Run(sc.Name, func(t *testing.T) {
			b := bin
			if sc.Nemesis == "clock" {
				b = clockBinary(t, bin)
			}
			s := Run(b, filepath.Join(dir, sc.Name), sc, t.Cleanup)
			sums = append(sums, s)
			// Run skips it when the harness failed early (ERROR).
			if _, err := os.Stat(filepath.Join(dir, sc.Name, "summary.json")); err != nil {
				_ = os.MkdirAll(filepath.Join(dir, sc.Name), 0o755)
				_ = s.WriteJSON(filepath.Join(dir, sc.Name, "summary.json"))
			}
			t.Logf("%s: %s fault=%q", sc.Name, s.Verdict, s.Fault)
			for _, r := range s.Results {
				t.Log(r.String())
				for _, n := range r.Notes {
					t.Log("  note: " + n)
				}
			}
			if s.Verdict != "PASS" {
				t.Errorf("%s: verdict %s; harness: %s; artifacts in %s", sc.Name, s.Verdict,
					strings.Join(s.Harness, "; "), filepath.Join(dir, sc.Name))
			}
		})
		_ = ok
	}
	md := report.Markdown(sums)
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, "summary.md"), []byte(md), 0o644)
	t.Logf("summary (%s):\n%s", filepath.Join(dir, "summary.md"), md)
}

// TestJepsenSmoke is the short matrix: baseline, halves, kill the leader,
// pause the leader; then the cron workload under no fault, a killed leader
// and skewed clocks (shorter phases: a tick a second gives plenty to
// check), and the DAG workload under kill-leader and halves; 3 nodes, one
// seed.
func TestJepsenSmoke(t *testing.T) {
	if os.Getenv("FOREMAN_JEPSEN") == "full" {
		t.Skip("FOREMAN_JEPSEN=full runs TestJepsenFull instead")
	}
	var m []Scenario
	for _, n := range []string{"none", "halves", "kill-leader", "pause-leader"} {
		m = append(m, Scenario{Name: n, Nemesis: n, Nodes: 3, Seed: 1,
			Warmup: 5 * time.Second, Fault: 12 * time.Second, Recover: 8 * time.Second, Drain: 60 * time.Second})
	}
	for _, n := range []string{"none", "kill-leader", "clock"} {
		m = append(m, Scenario{Name: "cron-" + n, Nemesis: n, Nodes: 3, Seed: 1, Workload: "cron",
			Warmup: 4 * time.Second, Fault: 8 * time.Second, Recover: 4 * time.Second, Drain: 45 * time.Second, Converge: 20 * time.Second})
	}
	// Security on: ACL (the workload sends a submit token, the harness the
	// management one; followers forward writes with the cluster-internal
	// secret) and TLS (HTTPS, mutual TLS for raft and internal HTTP,
	// encrypted gossip) under a killed leader.
	m = append(m, secureScenarios()...)
	m = append(m, dagScenarios()...)
	m = append(m, clientSmoke())
	runMatrix(t, append(m, gangSmoke()))
}

// clientSmoke is the smoke's client row (issue 23): three servers and two
// clients (agents outside raft) under the submit workload, one client
// frozen with SIGSTOP: its jobs must be fenced (its leases stop with its
// confirmed beats) before the leader reruns them elsewhere.
func clientSmoke() Scenario {
	return Scenario{Name: "clients-pause-client", Nemesis: "pause-client", Nodes: 3, Clients: 2, Seed: 1,
		Warmup: 5 * time.Second, Fault: 12 * time.Second, Recover: 8 * time.Second, Drain: 60 * time.Second}
}

// clientNemeses are the full matrix's client rows: a client killed,
// paused or cut from every server, and the leader killed, split or paused
// with clients attached.
var clientNemeses = []string{"kill-client", "pause-client", "isolate-client", "down-client", "kill-leader", "halves", "pause-leader"}

// TestJepsenClients runs only the client rows (FOREMAN_JEPSEN=clients):
// every client nemesis at seed 1 (FOREMAN_JEPSEN_NEMESES narrows it,
// FOREMAN_JEPSEN_SEEDS=N runs seeds 1..N, FOREMAN_JEPSEN_SECURE=1 turns on
// ACL and TLS).
func TestJepsenClients(t *testing.T) {
	if os.Getenv("FOREMAN_JEPSEN") != "clients" {
		t.Skip("set FOREMAN_JEPSEN=clients to run the client scenarios alone (the smoke runs clients-pause-client)")
	}
	nemeses := clientNemeses
	if v := os.Getenv("FOREMAN_JEPSEN_NEMESES"); v != "" {
		nemeses = strings.Split(v, ",")
	}
	seeds := envSeeds(1)
	var m []Scenario
	for seed := uint64(1); seed <= seeds; seed++ {
		for _, n := range nemeses {
			m = append(m, clientScenario(n, seed))
		}
	}
	// FOREMAN_JEPSEN_SECURE=1: with ACL and TLS on (the clients carry
	// client:NAME tokens and their own certificates).
	if os.Getenv("FOREMAN_JEPSEN_SECURE") == "1" {
		for i := range m {
			m[i].Name, m[i].ACL, m[i].TLS = "secure-"+m[i].Name, true, true
		}
	}
	runMatrix(t, m)
}

// envSeeds is FOREMAN_JEPSEN_SEEDS, or def when it is unset or not a
// positive number.
func envSeeds(def uint64) uint64 {
	if v, err := strconv.ParseUint(os.Getenv("FOREMAN_JEPSEN_SEEDS"), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}

func clientScenario(n string, seed uint64) Scenario {
	return Scenario{Name: fmt.Sprintf("clients-%s-s%d", n, seed), Nemesis: n, Nodes: 3, Clients: 2, Seed: seed}
}

// gangSmoke is the gang workload (gangs, failing tasks, preemption) under
// kill-random, short phases: the smoke's gang row (~45 s).
func gangSmoke() Scenario {
	return Scenario{Name: "gang-kill-random", Nemesis: "kill-random", Nodes: 3, Seed: 1, Workload: "gang",
		Warmup: 4 * time.Second, Fault: 10 * time.Second, Recover: 5 * time.Second, Drain: 60 * time.Second, Converge: 20 * time.Second}
}

// TestJepsenGang runs only gang scenarios (FOREMAN_JEPSEN=gang): the smoke
// row, or with FOREMAN_JEPSEN_NEMESES every named nemesis at seed
// FOREMAN_JEPSEN_SEEDS (default 1) with the full matrix's phases.
func TestJepsenGang(t *testing.T) {
	if os.Getenv("FOREMAN_JEPSEN") != "gang" {
		t.Skip("set FOREMAN_JEPSEN=gang to run the gang scenarios alone (the smoke runs gang-kill-random)")
	}
	v := os.Getenv("FOREMAN_JEPSEN_NEMESES")
	if v == "" {
		runMatrix(t, []Scenario{gangSmoke()})
		return
	}
	seed := envSeeds(1)
	var m []Scenario
	for _, n := range strings.Split(v, ",") {
		m = append(m, gangFull(n, seed))
	}
	runMatrix(t, m)
}

// gangFull is the full matrix's gang row for nemesis n (ring and bridge on
// five nodes).
func gangFull(n string, seed uint64) Scenario {
	nodes := 3
	if n == "ring" || n == "bridge" {
		nodes = 5
	}
	return Scenario{Name: fmt.Sprintf("gang-%s-s%d", n, seed), Nemesis: n, Nodes: nodes, Seed: seed, Workload: "gang"}
}

// gpuNemeses are TestJepsenGPU's rows: the leader (who picks the devices)
// killed, any node killed (its jobs outlive it and must be fenced before
// their devices go to anyone else), and a split.
var gpuNemeses = []string{"kill-leader", "kill-random", "halves"}

// TestJepsenGPU runs only the GPU scenarios (FOREMAN_JEPSEN=gpu): jobs
// asking 1, 2 or 4 GPUs on three fake 4-GPU hosts, checked by checker.GPU
// (no device held by two live executions at once; each execution got its
// attempt's devices). FOREMAN_JEPSEN_NEMESES and FOREMAN_JEPSEN_SEEDS
// (default 1) pick other rows, with the full matrix's phases.
func TestJepsenGPU(t *testing.T) {
	if os.Getenv("FOREMAN_JEPSEN") != "gpu" {
		t.Skip("set FOREMAN_JEPSEN=gpu to run the GPU scenarios (not in the smoke)")
	}
	v := os.Getenv("FOREMAN_JEPSEN_NEMESES")
	if v == "" {
		var m []Scenario
		for _, n := range gpuNemeses {
			m = append(m, Scenario{Name: "gpu-" + n, Nemesis: n, Nodes: 3, Seed: 1, Workload: "gpu",
				Warmup: 5 * time.Second, Fault: 12 * time.Second, Recover: 8 * time.Second, Drain: 60 * time.Second})
		}
		runMatrix(t, m)
		return
	}
	seed := envSeeds(1)
	var m []Scenario
	for _, n := range strings.Split(v, ",") {
		m = append(m, gpuFull(n, seed))
	}
	runMatrix(t, m)
}

// gpuFull is the full matrix's GPU row for nemesis n (ring and bridge on
// five nodes).
func gpuFull(n string, seed uint64) Scenario {
	nodes := 3
	if n == "ring" || n == "bridge" {
		nodes = 5
	}
	return Scenario{Name: fmt.Sprintf("gpu-%s-s%d", n, seed), Nemesis: n, Nodes: nodes, Seed: seed, Workload: "gpu"}
}

// secureScenarios run with ACL and TLS on: the submit workload under
// kill-leader (the killed agent restarts with its certificate, rejoins
// the encrypted gossip and mutual-TLS raft).
func secureScenarios() []Scenario {
	return []Scenario{{Name: "secure-kill-leader", Nemesis: "kill-leader", Nodes: 3, Seed: 1, ACL: true, TLS: true,
		Warmup: 5 * time.Second, Fault: 12 * time.Second, Recover: 8 * time.Second, Drain: 60 * time.Second}}
}

// TestJepsenSecure runs only the ACL+TLS scenarios (FOREMAN_JEPSEN=secure,
// make jepsen-secure); the smoke runs them too.
func TestJepsenSecure(t *testing.T) {
	if os.Getenv("FOREMAN_JEPSEN") != "secure" {
		t.Skip("set FOREMAN_JEPSEN=secure to run the ACL+TLS scenarios alone (the smoke runs them too)")
	}
	runMatrix(t, secureScenarios())
}

// TestJepsenDAG runs only the workflow scenarios (FOREMAN_JEPSEN=dag).
func TestJepsenDAG(t *testing.T) {
	if os.Getenv("FOREMAN_JEPSEN") != "dag" {
		t.Skip("set FOREMAN_JEPSEN=dag to run the DAG scenarios alone (the smoke runs them too)")
	}
	runMatrix(t, dagScenarios())
}

// dagScenarios run the workflow workload (checker.DAG: invariant 4 and
// cascades) under kill-leader and halves: ~30 s each.
func dagScenarios() []Scenario {
	var m []Scenario
	for _, n := range []string{"kill-leader", "halves"} {
		m = append(m, Scenario{Name: "dag-" + n, Nemesis: n, Nodes: 3, Seed: 1, Workload: "dag",
			Warmup: 5 * time.Second, Fault: 12 * time.Second, Recover: 8 * time.Second, Drain: 60 * time.Second})
	}
	return m
}

// TestJepsenFull runs every nemesis with three seeds; ring and bridge on
// five nodes. Gated by FOREMAN_JEPSEN=full (about 10 minutes per seed).
// The clock nemesis needs a binary built with -tags jepsenclock.
// FOREMAN_JEPSEN_SEEDS, FOREMAN_JEPSEN_NEMESES (comma list) and
// FOREMAN_JEPSEN_WORKLOADS (submit, cron, dag, gang, gpu, clients or outputs; all by default) narrow it;
// FOREMAN_JEPSEN_SECURE=1 runs it with ACL and TLS on.
func TestJepsenFull(t *testing.T) {
	if os.Getenv("FOREMAN_JEPSEN") != "full" {
		t.Skip("set FOREMAN_JEPSEN=full to run the full matrix")
	}
	seeds := envSeeds(3)
	nemeses := []string{"none", "halves", "isolate-leader", "ring", "bridge", "kill-leader", "kill-random", "pause-leader", "pause-random", "member", "pause-flicker", "clock", "storm"}
	if v := os.Getenv("FOREMAN_JEPSEN_NEMESES"); v != "" {
		nemeses = strings.Split(v, ",")
	}
	var m []Scenario
	for seed := uint64(1); seed <= seeds; seed++ {
		for _, n := range nemeses {
			nodes := 3
			if n == "ring" || n == "bridge" {
				nodes = 5
			}
			wl := os.Getenv("FOREMAN_JEPSEN_WORKLOADS") // "submit", "cron", "dag", "gang", "gpu" or all (unset)
			if wl == "" || wl == "submit" {
				m = append(m, Scenario{Name: fmt.Sprintf("%s-s%d", n, seed), Nemesis: n, Nodes: nodes, Seed: seed})
			}
			if wl == "" || wl == "cron" {
				m = append(m, Scenario{Name: fmt.Sprintf("cron-%s-s%d", n, seed), Nemesis: n, Nodes: nodes, Seed: seed,
					Workload: "cron", Warmup: 5 * time.Second, Fault: 15 * time.Second, Recover: 8 * time.Second, Drain: 60 * time.Second})
			}
			// The workflow workload under every nemesis, like the others:
			// invariant 4 and the cascades must hold whatever moves, splits,
			// pauses or kills the leader and the executors (ring and bridge
			// on five nodes, clock with the jepsenclock binary).
			if wl == "" || wl == "dag" {
				m = append(m, Scenario{Name: fmt.Sprintf("dag-%s-s%d", n, seed), Nemesis: n, Nodes: nodes, Seed: seed, Workload: "dag"})
			}
			// Gangs and preemption under every nemesis: gang-partial,
			// gang-placements and preempted.
			if wl == "" || wl == "gang" {
				m = append(m, gangFull(n, seed))
			}
			// Exact GPU assignment under every nemesis: the gpu checker.
			if wl == "" || wl == "gpu" {
				m = append(m, gpuFull(n, seed))
			}
		}
		// Outputs in an object store (issue 25) under a node killed
		// mid-upload, the store stopped, the leader killed.
		if wl := os.Getenv("FOREMAN_JEPSEN_WORKLOADS"); wl == "" || wl == "outputs" {
			for _, n := range outputsNemeses {
				m = append(m, outputsScenario(n, seed))
			}
		}
		// Clients (agents outside raft) with the submit workload.
		if wl := os.Getenv("FOREMAN_JEPSEN_WORKLOADS"); wl == "" || wl == "clients" {
			for _, n := range clientNemeses {
				m = append(m, clientScenario(n, seed))
			}
		}
	}
	// FOREMAN_JEPSEN_SECURE=1: the same matrix with ACL and TLS on.
	if os.Getenv("FOREMAN_JEPSEN_SECURE") == "1" {
		for i := range m {
			m[i].Name, m[i].ACL, m[i].TLS = "secure-"+m[i].Name, true, true
		}
	}
	runMatrix(t, m)
}

// outputsNemeses are the outputs workload's rows: a node killed -9 while
// uploads run (it restarts and resumes them), the object store stopped for
// the fault window, the store stopped and a node with uploads pending
// killed (mid-upload for sure), the leader killed; and store-down-giveup:
// store-down with uploads retried for 5 s only (the store is down for 15),
// so attempts that finish meanwhile must end partial, naming every file
// not stored and why, never stored nor pending.
var outputsNemeses = []string{"kill-random", "store-down", "store-down-kill", "kill-leader", "store-down-giveup"}

func outputsScenario(n string, seed uint64) Scenario {
	sc := Scenario{Name: fmt.Sprintf("outputs-%s-s%d", n, seed), Nemesis: n, Nodes: 3, Seed: seed, Workload: "outputs",
		Warmup: 6 * time.Second, Fault: 15 * time.Second, Recover: 8 * time.Second, Drain: 120 * time.Second}
	if n == "store-down-giveup" {
		sc.Nemesis, sc.StoreRetry = "store-down", 5*time.Second
	}
	return sc
}

// TestJepsenOutputs runs only the outputs scenarios (FOREMAN_JEPSEN=outputs):
// agents with a real S3 server (bin/weed, from scripts/test-deps.sh);
// every finished attempt's outputs end stored, byte for byte in the bucket
// and through the API of another node after the busiest node is killed,
// or partial naming the files (checker.Outputs). FOREMAN_JEPSEN_NEMESES
// and FOREMAN_JEPSEN_SEEDS (a number) narrow or move it. Not in the smoke.
func TestJepsenOutputs(t *testing.T) {
	if os.Getenv("FOREMAN_JEPSEN") != "outputs" {
		t.Skip("set FOREMAN_JEPSEN=outputs to run the object-store outputs scenarios")
	}
	nemeses := outputsNemeses
	if v := os.Getenv("FOREMAN_JEPSEN_NEMESES"); v != "" {
		nemeses = strings.Split(v, ",")
	}
	seed := envSeeds(1)
	var m []Scenario
	for _, n := range nemeses {
		m = append(m, outputsScenario(n, seed))
	}
	runMatrix(t, m)
}

// TestJepsenRegression pins scenarios to bugs found (README "Bugs found").
// Gated by FOREMAN_JEPSEN=regression.
func TestJepsenRegression(t *testing.T) {
	if os.Getenv("FOREMAN_JEPSEN") != "regression" {
		t.Skip("set FOREMAN_JEPSEN=regression to run the pinned bug scenarios")
	}
	runMatrix(t, []Scenario{
		// Bug 1: instant jobs while every agent is paused in short bursts;
		// a supervisor that finishes before the agent dials its lease
		// socket must not turn a success into a failure and a rerun.
		{Name: "bug1-instant-jobs", Nemesis: "pause-flicker", Nodes: 3, Seed: 1, Sleeps: []string{"0"}, Workers: 3,
			Warmup: 5 * time.Second, Fault: 20 * time.Second, Recover: 5 * time.Second},
		// Bug 2: the killed leader comes back after its attempts were
		// declared lost and re-placed; its stale FSM still lists some as
		// assigned to it, and it must not start them.
		{Name: "bug2-restart-stale-assignments", Nemesis: "kill-leader", Nodes: 3, Seed: 2, Sleeps: []string{"0.3"}, Workers: 3,
			Warmup: 5 * time.Second, Fault: 12 * time.Second, Recover: 8 * time.Second},
	})
}
