package systest

import (
	"os"
	"testing"
)

// TestSystemBenchGang runs foreman bench gang and bench preempt on three
// agents of one CPU each (the measurements: gang start spread p50
// over 20 runs, preemptor submit → running with grace 0) and checks that
// both complete; the numbers are logged for docs/benchmarks.md. Set
// FOREMAN_BENCH_GANG_RUNS to change the gang runs (default 20).
func TestSystemBenchGang(t *testing.T) {
	c := newSysCluster(t, 3, "--cpu", "1", "--reserve-cpu", "0")
	addr := c.leader().url("")
	runs := "20"
	if v := os.Getenv("FOREMAN_BENCH_GANG_RUNS"); v != "" {
		runs = v
	}
	r := runForeman(t, c.bin, addr, "bench", "gang", "--runs", runs, "--driver", "process")
	if r.code != 0 {
		t.Fatalf("bench gang: exit %d, stderr %q", r.code, r.stderr)
	}
	t.Logf("%s", r.stdout)
	r = runForeman(t, c.bin, addr, "bench", "preempt", "--runs", "5", "--driver", "process")
	if r.code != 0 {
		t.Fatalf("bench preempt: exit %d, stderr %q", r.code, r.stderr)
	}
	t.Logf("%s", r.stdout)
}
