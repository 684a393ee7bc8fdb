package systest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/httpapi"
)

// TestSystemBenchCron measures schedules at scale on one real agent
// (pending `foreman bench cron`, which waits for the CLI's move):
//
//	FOREMAN_BIN=bin/foreman FOREMAN_BENCH_CRON=10000 go test -run TestSystemBenchCron -v -timeout 30m ./systest/
//
// N schedules "@every 10s" share their ticks (start_at on a 10 s
// boundary), so each tick is a burst of N fires and the time between is
// quiet. All but 50 have a job that can never be placed (a constraint no
// node has), so the agent's CPU is the schedules' and the scheduler's, not
// the jobs'; 50 run `true` to time job start minus tick. Reported: fire
// lateness (fired-at minus tick, both on the leader's clock: the fire
// record's time), job start lateness, and the agent's CPU from 2 s to 9 s
// after each tick.
func TestSystemBenchCron(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FOREMAN_BENCH_CRON"))
	if n <= 0 {
		t.Skip("set FOREMAN_BENCH_CRON=<schedules> to run the cron bench")
	}
	const probes, bursts, every = 50, 3, 10 * time.Second
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
	t.Cleanup(a.stop9)
	cl := apiClient(t, a.url(""), cli.ClientConfig{})
	ctx := context.Background()
	eventually(t, systemTimeout, "dev agent ready", func() error { return cl.Ready(ctx) })

	start := time.Now().Truncate(every).Add(every)
	startAt := httpapi.JSONString(start.UTC().Format(time.RFC3339))
	created := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				job := &httpapi.JobSpecInput{Command: httpapi.Argv("true"), Driver: "process",
					Constraints: []string{"bench == none"}, AllowUnplaceable: true}
				if i < probes {
					job = &httpapi.JobSpecInput{Command: httpapi.Argv("true"), Driver: "process"}
				}
				in := httpapi.ScheduleInput{Name: fmt.Sprintf("bench-%05d", i), Cron: "@every 10s", StartAt: startAt, Job: job}
				if err := cl.Do(ctx, api.Request{Method: http.MethodPost, Path: "/v1/schedules", Body: in}, nil); err != nil {
					failed.Add(1)
					t.Logf("create %s: %v", in.Name, err)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d creates failed", failed.Load())
	}
	t.Logf("%d schedules created in %.1fs", n, time.Since(created).Seconds())

	// The first tick after creation, then CPU between the next bursts.
	first := time.Now().Truncate(every).Add(every)
	var quiet []float64
	for b := range bursts {
		tick := first.Add(time.Duration(b) * every)
		time.Sleep(time.Until(tick.Add(2 * time.Second))) // placing the measurement window, not synchronising
		c0, t0 := cpuSeconds(t, a.cmd.Process.Pid), time.Now()
		time.Sleep(time.Until(tick.Add(9 * time.Second)))
		c1, t1 := cpuSeconds(t, a.cmd.Process.Pid), time.Now()
		quiet = append(quiet, 100*(c1-c0)/t1.Sub(t0).Seconds())
	}
	last := first.Add(time.Duration(bursts-1) * every)

	list, err := cl.ListSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fire, startLate []time.Duration
	var jobs []string
	ticks := map[string]time.Time{}
	for _, s := range list {
		for _, f := range s.Fires {
			if f.Tick.Before(first) || f.Tick.After(last) || f.JobID == "" {
				continue
			}
			fire = append(fire, f.At.Sub(f.Tick))
			if strings.Compare(s.Spec.Name, fmt.Sprintf("bench-%05d", probes)) < 0 {
				jobs = append(jobs, f.JobID)
				ticks[f.JobID] = f.Tick
			}
		}
	}
	for _, id := range jobs {
		var d *httpapi.JobDetail
		eventually(t, systemTimeout, "probe job "+id+" started", func() error {
			d, err = jobDetail(ctx, cl, id)
			if err == nil && (len(d.Attempts) == 0 || d.Attempts[0].StartedAt.IsZero()) {
				err = fmt.Errorf("not started")
			}
			return err
		})
		startLate = append(startLate, d.Attempts[0].StartedAt.Sub(ticks[id]))
	}
	if want := n * bursts; len(fire) != want {
		t.Errorf("%d fires in the measured ticks, want %d", len(fire), want)
	}
	sort.Float64s(quiet)
	t.Logf("schedules %d, fires %d over %d ticks: fire lateness p50 %v p99 %v max %v; job start lateness (%d probes) p50 %v p99 %v; agent CPU between ticks %.1f%% of a core (median of %v)",
		n, len(fire), bursts, pct(fire, 50), pct(fire, 99), pct(fire, 100), len(startLate), pct(startLate, 50), pct(startLate, 99),
		quiet[len(quiet)/2], quiet)
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}

// cpuSeconds is a process's user+system CPU time from /proc.
func cpuSeconds(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // clock ticks; USER_HZ is 100 on Linux
}
