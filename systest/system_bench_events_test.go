package systest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/httpapi"
)

// Event-stream figures on a real dev agent (docs/benchmarks.md, "Events"):
//
//	FOREMAN_BIN=bin/foreman go test -run '^$' -bench 'Events|RunLatency' -benchtime 1x ./systest/
//
// Single node (--dev style: one agent, process driver) on this machine.

// benchAgent starts one agent that bootstraps alone.
func benchAgent(t testing.TB, args ...string) *agentProc {
	t.Helper()
	root, err := os.MkdirTemp("", "fm-bench-") // short: socket paths live under the data dir
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	ip := subnet() + ".1" // 127.0.0.1's ports are busy with other tests' connections
	base := freeBaseOn(t, ip)
	a := startAgentAt(t, foremanBin(t), "b1", filepath.Join(root, "data"), ip, base,
		append([]string{"--bootstrap-expect", "1", "--default-driver", "process"}, args...)...)
	eventually(t, systemTimeout, "the agent ready", func() error { var v map[string]any; return getJSON(a.url("/v1/ready"), &v) })
	return a
}

func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return -1
}

func metricValue(t testing.TB, a *agentProc, name string) float64 {
	t.Helper()
	resp, err := httpGet(a.url("/v1/metrics"))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(resp, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// BenchmarkEventsIdleSubscribersRSS: the agent's RSS with 10,000 open,
// idle GET /v1/events streams, against none. They all come from this
// process's one IP, as through a proxy: --max-conns-per-ip (1,024 by
// default) is lifted, as an operator serving them so would.
func BenchmarkEventsIdleSubscribersRSS(b *testing.B) {
	const n = 10000
	runIsolated(b, func(t testing.TB) {
		a := benchAgent(t, "--max-conns-per-ip", "0")
		time.Sleep(2 * time.Second) // settle: start-up allocations
		before := rssKiB(a.cmd.Process.Pid)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		addr := net.JoinHostPort(a.host(), fmt.Sprint(a.base))
		for i := 0; i < n; i++ {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			fmt.Fprintf(c, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
			conns = append(conns, c)
		}
		eventually(t, time.Minute, "10,000 subscribers", func() error {
			if v := metricValue(t, a, "foreman_event_subscribers"); v != n {
				return fmt.Errorf("%v subscribers", v)
			}
			return nil
		})
		time.Sleep(time.Second)
		after := rssKiB(a.cmd.Process.Pid)
		b.ReportMetric(float64(before)/1024, "rss-idle-MiB")
		b.ReportMetric(float64(after)/1024, "rss-10k-subscribers-MiB")
		b.ReportMetric(float64(after-before)/n, "KiB/subscriber")
		b.ReportMetric(0, "ns/op")
		b.Logf("RSS %d KiB with no stream, %d KiB with %d idle streams (%.1f KiB each)", before, after, n, float64(after-before)/n)
	})
}

// subscribers opens k streams and counts the events they receive. They
// count "id:" lines without decoding: the agent's cost is what is
// measured, and the clients share its two cores.
func subscribers(ctx context.Context, t testing.TB, a *agentProc, k int) (*atomic.Int64, func()) {
	var got atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	for i := 0; i < k; i++ {
		req, err := http.NewRequestWithContext(ctx, "GET", a.url("/v1/events"), nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "id: ") {
					got.Add(1)
				}
			}
		}()
	}
	eventually(t, time.Minute, fmt.Sprintf("%d subscribers", k), func() error {
		if v := metricValue(t, a, "foreman_event_subscribers"); int(v) != k {
			return fmt.Errorf("%v subscribers", v)
		}
		return nil
	})
	return &got, func() { cancel(); wg.Wait() }
}

// benchJSON runs a foreman bench subcommand and decodes its --json output.
func benchJSON(t testing.TB, a *agentProc, v any, args ...string) {
	t.Helper()
	args = append([]string{"bench"}, args...)
	args = append(args, "--json", "--addr", a.url(""))
	out, err := exec.Command(foremanBin(t), args...).Output()
	if err != nil {
		t.Fatalf("foreman %v: %v\n%s", args, err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("foreman %v: %v\n%s", args, err, out)
	}
}

// BenchmarkEventsSubscribersCost: submit and throughput figures with 0
// and 100 subscribers, alternating in one run, and the events the 100
// deliver per second meanwhile (foreman bench events).
func BenchmarkEventsSubscribersCost(b *testing.B) {
	runIsolated(b, func(t testing.TB) {
		a := benchAgent(t)
		var r benchEventsResult
		benchJSON(t, a, &r, "events", "--subscribers", "100", "--rounds", "3", "--jobs", "5000", "--throughput-jobs", "2000")
		for _, run := range r.Runs {
			b.Logf("round %d, %3d subscribers: submit %.0f jobs/s, throughput %.0f jobs/s", run.Round, run.Subscribers, run.Submit, run.Throughput)
		}
		b.ReportMetric(r.Submit0, "submit-0subs-jobs/s")
		b.ReportMetric(r.SubmitN, "submit-100subs-jobs/s")
		b.ReportMetric(r.Throughput0, "throughput-0subs-jobs/s")
		b.ReportMetric(r.ThroughputN, "throughput-100subs-jobs/s")
		b.ReportMetric(r.Delivered, "events-delivered/s")
		b.ReportMetric(0, "ns/op")
	})
}

// benchEventsResult is what foreman bench events --json prints.
type benchEventsResult struct {
	Submit0     float64 `json:"submit_jobs_per_second_0"`
	SubmitN     float64 `json:"submit_jobs_per_second_n"`
	Throughput0 float64 `json:"throughput_jobs_per_second_0"`
	ThroughputN float64 `json:"throughput_jobs_per_second_n"`
	Delivered   float64 `json:"events_delivered_per_second"`
	Runs        []struct {
		Round       int     `json:"round"`
		Subscribers int     `json:"subscribers"`
		Submit      float64 `json:"submit_jobs_per_second"`
		Throughput  float64 `json:"throughput_jobs_per_second"`
		Delivered   float64 `json:"events_delivered_per_second"`
	} `json:"runs"`
}

// TestSystemBenchEvents: foreman bench events runs its rounds (0 streams,
// then N) and its streams receive the jobs' events. A smoke test of the
// command; the figures are BenchmarkEventsSubscribersCost's.
func TestSystemBenchEvents(t *testing.T) {
	a := benchAgent(t)
	var r benchEventsResult
	benchJSON(t, a, &r, "events", "--subscribers", "3", "--rounds", "1", "--jobs", "40", "--throughput-jobs", "10")
	if len(r.Runs) != 2 || r.Runs[0].Subscribers != 0 || r.Runs[1].Subscribers != 3 {
		t.Fatalf("runs %+v, want one round of 0 then 3 streams", r.Runs)
	}
	if r.Submit0 <= 0 || r.SubmitN <= 0 || r.Throughput0 <= 0 || r.ThroughputN <= 0 {
		t.Fatalf("figures %+v", r)
	}
	// Ten jobs run while the streams are open: each stream sees at least
	// their submits, placements, starts and ends.
	if r.Delivered <= 0 || r.Runs[1].Delivered <= 0 {
		t.Fatalf("no events delivered: %+v", r)
	}
	eventually(t, systemTimeout, "the bench's streams closed on the node", func() error {
		if got := metricValue(t, a, "foreman_event_subscribers"); got != 0 {
			return fmt.Errorf("%v streams still open", got)
		}
		return nil
	})
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// BenchmarkRunLatency: `foreman run -- true` end to end (CLI process start
// to exit, the CLI polls today), next to the same submit followed by
// WaitJob (the event stream) from a client in this process.
func BenchmarkRunLatency(b *testing.B) {
	const runs = 50
	runIsolated(b, func(t testing.TB) {
		a := benchAgent(t)
		var cliRuns, streamRuns []time.Duration
		bin := foremanBin(t)
		cl := apiClient(t, a.url(""), cli.ClientConfig{})
		for i := 0; i < runs; i++ {
			start := time.Now()
			cmd := exec.Command(bin, "run", "--addr", a.url(""), "--", "true")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("foreman run: %v\n%s", err, out)
			}
			cliRuns = append(cliRuns, time.Since(start))

			start = time.Now()
			res, err := cli.SubmitJob(context.Background(), cl, httpapi.JobSpecInput{Command: json.RawMessage(`["true"]`)}, "")
			if err != nil {
				t.Fatal(err)
			}
			d, err := cl.WaitJob(context.Background(), res.ID, nil)
			if err != nil || d.Job.State != "succeeded" {
				t.Fatalf("wait: %v %+v", err, d)
			}
			streamRuns = append(streamRuns, time.Since(start))
		}
		p50 := func(v []time.Duration) float64 {
			s := append([]time.Duration(nil), v...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			return float64(s[len(s)/2].Microseconds()) / 1000
		}
		b.ReportMetric(p50(cliRuns), "cli-run-p50-ms")
		b.ReportMetric(p50(streamRuns), "submit+waitjob-p50-ms")
		b.ReportMetric(0, "ns/op")
		b.Logf("over %d runs: foreman run p50 %.1f ms; submit + WaitJob p50 %.1f ms", runs, p50(cliRuns), p50(streamRuns))
	})
}
