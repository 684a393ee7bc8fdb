package systest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/httpapi"
)

// TestSystemStorm (issue 13): container jobs without resource requests and
// process jobs submitted as fast as the API takes them to three agents on
// this machine. Every job must finish, no election may happen, and
// GET /v1/health must keep answering on every node throughout (p99 within
// stormHealthP99 in the full storm; within 1 s, a hang bound, in make test). The figures (elections, health p50/p99/max, time until all
// finished, peak load average and peak runnable threads) are logged with
// the prefix "storm:" for docs/operations.md.
//
// The default size fits `make test` (tens of seconds); FOREMAN_STORM=full
// runs the 300 container + 5,000 process jobs (make storm, and
// make jepsen). FOREMAN_STORM=C,P picks other sizes.
func TestSystemStorm(t *testing.T) {
	containers, processes := 20, 400
	// make test runs this beside other packages' tests (-p 2, the jepsen
	// smoke among them) on two cores: there the health bound only catches
	// an API that stopped answering (a failed probe counts 2 s), and the
	// p99 is a figure in the log (issue 22: 429 ms at load average 33).
	// The full storm (make storm, make jepsen) holds the 100 ms.
	healthP99 := time.Second
	switch v := os.Getenv("FOREMAN_STORM"); {
	case v == "full":
		containers, processes = 300, 5000
		healthP99 = stormHealthP99
	case strings.Contains(v, ","):
		c, p, _ := strings.Cut(v, ",")
		containers, _ = strconv.Atoi(c)
		processes, _ = strconv.Atoi(p)
	}
	c := newSysCluster(t, 3)
	leader := c.leader()
	var nodes struct {
		Nodes []struct {
			Drivers []string `json:"drivers"`
		} `json:"nodes"`
	}
	if err := getJSON(leader.url("/v1/nodes"), &nodes); err != nil {
		t.Fatal(err)
	}
	if containers > 0 && !slices.Contains(nodes.Nodes[0].Drivers, "container") {
		requireCapability(t, false, "the container driver (root + cgroups)")
	}

	terms := map[string]uint64{}
	for _, a := range c.agents {
		terms[a.name] = termOf(t, a)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	probes := probeHealth(ctx, c.agents)
	load := sampleLoad(ctx)

	// Submit: four clients, batches of 100 process jobs; one client sends
	// the container jobs in batches of 50. The Go client waits out 429s.
	start := time.Now()
	label := fmt.Sprintf("storm-%d", start.UnixNano())
	spec := func(driver string) httpapi.JobSpecInput {
		return httpapi.JobSpecInput{Command: []byte(`["true"]`), Driver: driver, Labels: map[string]string{"storm": label}}
	}
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	submit := func(addr string, driver string, n, batch int) {
		defer wg.Done()
		cl, err := cli.NewClient(addr, cli.ClientConfig{})
		if err != nil {
			t.Error(err)
			return
		}
		for n > 0 {
			k := min(n, batch)
			specs := make([]httpapi.JobSpecInput, k)
			for i := range specs {
				specs[i] = spec(driver)
			}
			sctx, cancel := context.WithTimeout(ctx, 2*systemTimeout)
			var res []api.SubmitResponse
			err := cli.SubmitJobs(sctx, cl, httpapi.BatchSubmitRequest{Jobs: specs}, &res)
			cancel()
			if err != nil {
				t.Errorf("submit %d %s jobs: %v", k, driver, err)
				return
			}
			mu.Lock()
			for _, r := range res {
				ids = append(ids, r.ID)
			}
			mu.Unlock()
			n -= k
		}
	}
	if containers > 0 {
		wg.Add(1)
		go submit(c.agents[0].url(""), "container", containers, 50)
	}
	for i := range 4 {
		wg.Add(1)
		go submit(c.agents[i%len(c.agents)].url(""), "process", processes/4+map[bool]int{true: processes % 4}[i == 0], 100)
	}
	wg.Wait()
	submitted := time.Since(start)
	if t.Failed() {
		return
	}

	// Wait for every job, oldest first, reading one job at a time from a
	// follower (the leader has enough to do).
	reader := c.others(leader)[0]
	failed := map[string]string{}
	left := ids
	deadline := time.Now().Add(10 * time.Minute)
	for len(left) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs not finished after 10 minutes", len(left), len(ids))
		}
		j, err := getJob(reader, left[0])
		if err != nil || !terminal(j.Job.State) {
			time.Sleep(100 * time.Millisecond) // polling the cluster, not synchronising goroutines
			continue
		}
		if j.Job.State != "succeeded" {
			failed[j.Job.ID] = j.String()
		}
		left = left[1:]
	}
	finished := time.Since(start)
	stop()
	lat := <-probes
	peakLoad, peakRunnable := (<-load)()

	elections := uint64(0)
	for _, a := range c.agents {
		if d := termOf(t, a) - terms[a.name]; d > elections {
			elections = d
		}
	}
	p50, p99, worst := percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 1)
	t.Logf("storm: %d container + %d process jobs on 3 agents: submitted in %.1fs, all finished in %.1fs; elections %d; "+
		"GET /v1/health p50 %.1f ms p99 %.1f ms max %.1f ms (%d probes); peak load average %.1f, peak runnable %d",
		containers, processes, submitted.Seconds(), finished.Seconds(), elections,
		ms(p50), ms(p99), ms(worst), len(lat), peakLoad, peakRunnable)
	if len(failed) > 0 {
		n := 0
		for _, s := range failed {
			if n++; n > 5 {
				break
			}
			t.Errorf("not succeeded: %s", s)
		}
		t.Errorf("%d of %d jobs did not succeed", len(failed), len(ids))
	}
	if elections > 0 {
		t.Errorf("%d election(s) during the storm: the leader must keep its leadership", elections)
	}
	if p99 > healthP99 {
		t.Errorf("GET /v1/health p99 %.1f ms, want at most %s", ms(p99), healthP99)
	}
}

// stormHealthP99 is the bound on health answers during a storm.
const stormHealthP99 = 100 * time.Millisecond

func terminal(state string) bool {
	switch state {
	case "succeeded", "failed", "cancelled", "skipped":
		return true
	}
	return false
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	s = slices.Clone(s)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(int(p*float64(len(s))), len(s)-1)]
}

// probeHealth GETs /v1/health on every agent every 50 ms until ctx ends,
// then sends every latency (a failed or timed-out probe counts as 2 s).
func probeHealth(ctx context.Context, agents []*agentProc) <-chan []time.Duration {
	out := make(chan []time.Duration, 1)
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				t0 := time.Now()
				resp, err := hc.Get(a.url("/v1/health"))
				d := time.Since(t0)
				if err != nil || resp.StatusCode != http.StatusOK {
					d = 2 * time.Second
				}
				if resp != nil {
					resp.Body.Close()
				}
				mu.Lock()
				all = append(all, d)
				mu.Unlock()
			}
		}()
	}
	go func() {
		wg.Wait()
		out <- all
	}()
	return out
}

// sampleLoad reads /proc/loadavg every 500 ms until ctx ends and returns
// the peak 1-minute load average and the peak of runnable threads (the
// fourth field's numerator: the load average lags a short storm).
func sampleLoad(ctx context.Context) <-chan func() (float64, int) {
	out := make(chan func() (float64, int), 1)
	go func() {
		var peak float64
		var runnable int
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if b, err := os.ReadFile("/proc/loadavg"); err == nil {
				f := strings.Fields(string(b))
				if len(f) >= 4 {
					if v, err := strconv.ParseFloat(f[0], 64); err == nil && v > peak {
						peak = v
					}
					r, _, _ := strings.Cut(f[3], "/")
					if n, err := strconv.Atoi(r); err == nil && n > runnable {
						runnable = n
					}
				}
			}
			select {
			case <-ctx.Done():
				out <- func() (float64, int) { return peak, runnable }
				return
			case <-tick.C:
			}
		}
	}()
	return out
}
