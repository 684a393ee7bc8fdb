package systest

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The web UI's numbers (ui/README.md, "Measured"): page weight of a first
// load, time to first render of the Jobs page with 100,000 jobs in the
// state, and the agent's CPU with 20 open UIs. Not part of make test:
//
//	FOREMAN_UI_BENCH=1 FOREMAN_BIN=bin/foreman flock /tmp/foreman-heavy.lock go test -run TestSystemUIBench -v ./systest/
func TestSystemUIBench(t *testing.T) {
	if os.Getenv("FOREMAN_UI_BENCH") == "" {
		t.Skip("a measurement: set FOREMAN_UI_BENCH=1")
	}
	jobs := 100_000
	if n := os.Getenv("FOREMAN_UI_BENCH_JOBS"); n != "" {
		fmt.Sscan(n, &jobs)
	}
	b := newBrowser(t)
	a := benchAgent(t)

	// 100,000 jobs waiting on one long parent: in the state, never run.
	parent := submitJob(t, a, map[string]any{"name": "ui-bench-parent", "command": []string{"sleep", "3600"}})
	start := time.Now()
	var mid string
	for done := 0; done < jobs; {
		n := min(5000, jobs-done)
		batch := make([]map[string]any, n)
		for i := range batch {
			batch[i] = map[string]any{"name": fmt.Sprintf("bulk-%06d", done+i), "command": "true", "depends_on": []string{parent},
				"labels": map[string]string{"batch": fmt.Sprint((done + i) / 5000)}}
		}
		var out struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		if err := postJSON(a.url("/v1/jobs"), map[string]any{"jobs": batch}, &out); err != nil {
			t.Fatal(err)
		}
		if done <= jobs/10 && jobs/10 < done+n {
			mid = out.Jobs[jobs/10-done].ID // 90% of the jobs are older than this one
		}
		done += n
	}
	t.Logf("submitted %d jobs in %s", jobs, time.Since(start).Round(time.Millisecond))

	apiTime := func(path string) time.Duration {
		var best time.Duration
		for i := 0; i < 3; i++ {
			s := time.Now()
			resp, err := http.Get(a.url(path))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if d := time.Since(s); i == 0 || d < best {
				best = d
			}
		}
		return best
	}
	cur := base64.RawURLEncoding.EncodeToString([]byte(mid))
	t.Logf("API (best of 3): first page of 50 %s; page at 90%% deep (cursor) %s; state=waiting %s; counts %s; name filter matching nothing (scans all) %s",
		apiTime("/v1/jobs?limit=50"), apiTime("/v1/jobs?limit=50&cursor="+cur), apiTime("/v1/jobs?limit=50&state=waiting"),
		apiTime("/v1/jobs/counts"), apiTime("/v1/jobs?limit=50&name=nomatch"))

	// Page weight: the first load of the Jobs page in a fresh profile.
	b.open(a.url("/ui/jobs"), "#jobs tbody tr[data-job]")
	type weight struct {
		Assets, AssetsDecoded, API, Requests int
	}
	w := eval[weight](b, `(() => { const n = performance.getEntriesByType("navigation")[0]; let o = {Assets: n.transferSize, AssetsDecoded: n.decodedBodySize, API: 0, Requests: 1};
		for (const r of performance.getEntriesByType("resource")) { o.Requests++; if (r.name.includes("/ui/")) { o.Assets += r.transferSize; o.AssetsDecoded += r.decodedBodySize; } else o.API += r.transferSize; }
		return o; })()`)
	t.Logf("page weight, first load of /ui/jobs: %.1f KB transferred for the page and its modules (%.1f KB uncompressed), %.1f KB of API replies, %d requests",
		float64(w.Assets)/1024, float64(w.AssetsDecoded)/1024, float64(w.API)/1024, w.Requests)

	// Time to first render: navigation start → the first page's rows in the DOM.
	render := func(path string) time.Duration {
		var ds []time.Duration
		for i := 0; i < 5; i++ {
			b.open(a.url(path), "#jobs tbody tr[data-job]")
			ms := eval[float64](b, `Number(document.querySelector("[data-view=jobs]").dataset.firstRender)`)
			ds = append(ds, time.Duration(ms*float64(time.Millisecond)))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	t.Logf("Jobs page, time to first render with %d jobs (median of 5, cached assets): %s; filtered state=waiting %s; page 90%% deep %s",
		jobs, render("/ui/jobs"), render("/ui/jobs?state=waiting"), render("/ui/jobs?cursor="+cur))

	// Agent CPU over 60 s with a steady trickle of jobs, without and with 20 open UIs.
	window := 60 * time.Second
	if d := os.Getenv("FOREMAN_UI_BENCH_WINDOW"); d != "" {
		window, _ = time.ParseDuration(d)
	}
	load := func(ctx context.Context) *atomic.Int64 {
		var n atomic.Int64
		go func() {
			tick := time.NewTicker(200 * time.Millisecond) // 5 jobs/s
			defer tick.Stop()
			for ctx.Err() == nil {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if postJSON(a.url("/v1/jobs"), map[string]any{"name": "trickle", "command": "true"}, nil) == nil {
					n.Add(1)
				}
			}
		}()
		return &n
	}
	measure := func(what string) float64 {
		ctx, cancel := context.WithCancel(context.Background())
		n := load(ctx)
		c0, s := cpuSeconds(t, a.cmd.Process.Pid), time.Now()
		time.Sleep(window) // a measurement window, not synchronisation
		cpu := (cpuSeconds(t, a.cmd.Process.Pid) - c0) / time.Since(s).Seconds()
		cancel()
		t.Logf("%s: agent CPU %.1f%% of a core over %s (%d jobs submitted meanwhile)", what, cpu*100, window, n.Load())
		return cpu
	}
	base := measure("no UI open")
	// Each UI in its own browser context (as 20 operators' browsers would
	// be): its own connections and its own event stream.
	for i := 0; i < 20; i++ {
		ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		page := []string{"/ui/", "/ui/jobs"}[i%2]
		cctx, c2 := context.WithTimeout(ctx, 2*stepTimeout)
		if err := chromedp.Do(cctx, chromedp.Navigate(a.url(page)), chromedp.WaitVisible(chromedp.CSS("#main .view h1"))); err != nil {
			t.Fatalf("tab %d: %v", i, err)
		}
		c2()
	}
	with := measure("20 UIs open (10 overview, 10 jobs)")
	t.Logf("20 open UIs cost the agent %.1f%% of a core", (with-base)*100)
}
