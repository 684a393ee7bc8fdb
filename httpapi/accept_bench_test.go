package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchWorkflowAccept measures the accept path of a 10,000-job
// random DAG (≤ 3 parents each, as `foreman bench dag`) without raft: the
// HTTP request, decoding and validation, the command's encoding and the
// FSM apply. FOREMAN_BENCH_ACCEPT=N runs N accepts and prints the medians
// of wall time and of this process's CPU time (the steadier figure on a
// shared machine); docs/benchmarks.md has the numbers.
func TestBenchWorkflowAccept(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FOREMAN_BENCH_ACCEPT"))
	if n == 0 {
		t.Skip("set FOREMAN_BENCH_ACCEPT=N to measure N accepts of a 10,000-job workflow")
	}
	a := newTestAPI(t)
	rng := rand.New(rand.NewPCG(1, 2))
	type j struct {
		Name      string   `json:"name"`
		Command   string   `json:"command"`
		Driver    string   `json:"driver"`
		DependsOn []string `json:"depends_on,omitempty"`
	}
	var jobs []j
	for i := range 10000 {
		seen := map[int]bool{}
		var deps []string
		for k := 0; k < 3 && i > 0; k++ {
			if p := rng.IntN(i); !seen[p] {
				seen[p] = true
				deps = append(deps, fmt.Sprint("n", p))
			}
		}
		jobs = append(jobs, j{Name: fmt.Sprint("n", i), Command: "true", Driver: "process", DependsOn: deps})
	}
	var walls, cpus []time.Duration
	for r := range n {
		b, _ := json.Marshal(map[string]any{"name": fmt.Sprint("w", r), "jobs": jobs})
		t0, c0 := time.Now(), cpuNow()
		code, body := a.do("POST", "/v1/workflows", string(b))
		if code != http.StatusCreated {
			t.Fatalf("%d %s", code, body[:200])
		}
		walls, cpus = append(walls, time.Since(t0)), append(cpus, cpuNow()-c0)
	}
	med := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	fmt.Printf("workflow accept (10,000 jobs): wall median %v, CPU median %v, n=%d\n", med(walls), med(cpus), n)
}
