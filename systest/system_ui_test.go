package systest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The web UI in a real headless Chromium against a real 3-agent cluster,
// through a follower: submit from the form and watch the job succeed live,
// its log line, a validation message, cancel, drain, a workflow's DAG, a
// schedule's trigger, and hostile job names and logs shown as text.
// Screenshots of every page (1280×800) go to .screenshots/ (gitignored).

// chromePath finds the browser: $FOREMAN_CHROME, else Debian's chromium
// binary itself (not the /usr/bin wrapper, which does not exec and would
// leave the browser running when chromedp ends it).
func chromePath() string {
	if p := os.Getenv("FOREMAN_CHROME"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/lib/chromium/chromium-headless-shell", "/usr/bin/chromium-headless-shell"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// stepTimeout bounds one browser step: generous, because on a loaded
// 2-core machine a page load alone has taken 12 s.
const stepTimeout = 45 * time.Second

// browser is one headless Chromium for a test; tabs share it.
type browser struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	errs    []string
	shotDir string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromePath()
	requireCapability(t, exe != "", "a Chromium browser (apt-get install chromium; or set FOREMAN_CHROME)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800), chromedp.Flag("disable-component-update", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, shotDir: ".screenshots"}
	// Cleanups run last-registered first: the browser goes before the agents.
	t.Cleanup(func() { cancelB(); cancelA() })
	b.listen(exe)
	_ = os.MkdirAll(b.shotDir, 0o755)
	return b
}

// tab opens another tab in the same browser (same profile, so the same
// six connections per server), reporting its page errors like b.
func (b *browser) tab() (*browser, context.CancelFunc) {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	nb := &browser{t: b.t, ctx: ctx, shotDir: b.shotDir}
	nb.listen("tab")
	return nb, cancel
}

// listen collects the page's errors (exceptions, console.error, script and
// security errors) for checkErrors.
func (b *browser) listen(exe string) {
	t := b.t
	ctx := b.ctx
	listen := func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg = fmt.Sprintf("exception: %s %s:%d", d.Text, d.URL, d.LineNumber)
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, fmt.Sprint(a.Value)+a.Description)
				}
				msg = "console.error: " + strings.Join(parts, " ")
			}
		case *log.EventEntryAdded:
			// Network errors (a 404 for the log of a job not yet placed, a
			// stream aborted on navigation) are expected; script and
			// security errors (a refused module, a CSP violation) are not.
			if ev.Entry.Level == log.EntryLevelError && ev.Entry.Source != log.EntrySourceNetwork {
				msg = "log: " + ev.Entry.Text + " " + ev.Entry.URL
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errs = append(b.errs, msg)
			b.mu.Unlock()
		}
	}
	if err := chromedp.Listen(ctx, listen); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	for _, cmd := range []cdp.Command[cdp.Empty, cdp.Empty]{log.Enable, runtime.Enable} {
		if _, err := chromedp.Call(ctx, cmd, cdp.Empty{}); err != nil {
			t.Fatalf("start %s: %v", exe, err)
		}
	}
}

// run runs actions with a bound, failing the test with a screenshot.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	start := time.Now()
	defer func() {
		if d := time.Since(start); d > 2*time.Second {
			b.t.Logf("slow browser step (%s): %s", d.Round(time.Millisecond), what)
		}
	}()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
	b.checkErrors(what)
}

func (b *browser) checkErrors(what string) {
	b.t.Helper()
	b.mu.Lock()
	errs := b.errs
	b.errs = nil
	b.mu.Unlock()
	if len(errs) > 0 {
		b.fail(what, fmt.Errorf("page errors: %s", strings.Join(errs, "; ")))
	}
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		p := filepath.Join(b.shotDir, "FAILED-"+strings.ReplaceAll(b.t.Name(), "/", "_")+".png")
		_ = os.WriteFile(p, png, 0o644)
		b.t.Logf("screenshot of the failure: %s", p)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " " + JSON.stringify(window.foremanStats || null)`))
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
	b.t.Fatalf("%s: %v\nat %s, page text:\n%s", what, err, loc, body)
}

// wait polls a JS expression until it is true (30 s).
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	b.run("wait for "+what, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(stepTimeout-5*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		return chromedp.Void{}, err
	})
}

// eval evaluates expr into a T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fail("eval "+expr, err)
	}
	b.checkErrors("eval")
	return v
}

func (b *browser) open(url, readySel string) {
	b.t.Helper()
	b.run("open "+url, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(readySel)))
}

func (b *browser) shot(name string) {
	b.t.Helper()
	b.checkErrors("before screenshot " + name)
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.fail("screenshot "+name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shotDir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// jsStr quotes s as a JS string literal.
func jsStr(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "<", `\x3c`)
	return `"` + r.Replace(s) + `"`
}

func TestSystemUI(t *testing.T) {
	b := newBrowser(t)
	c := newSysCluster(t, 3)
	leader := c.leader()
	via := c.followers()[0]
	ui := via.url("/ui/")
	t.Logf("UI through follower %s; leader %s", via.name, leader.name)

	t.Run("overview", func(t *testing.T) {
		b.t = t
		b.open(ui, "#counts .card")
		b.wait("leader named", `document.querySelector("#leader")?.textContent === `+jsStr(leader.name))
		b.wait("via names the follower", `document.querySelector("#via").textContent.includes(`+jsStr(via.name)+`)`)
		b.wait("the event stream is live", `document.querySelector("#live").classList.contains("live")`)
	})

	var okID string
	t.Run("submit form, live success, log line", func(t *testing.T) {
		b.t = t
		b.open(via.url("/ui/submit"), "#submit-form")
		// The API's validation message is shown, naming the field.
		b.run("bad priority",
			chromedp.SendKeys(chromedp.CSS("#f-command"), "echo hello-from-ui"),
			chromedp.SendKeys(chromedp.CSS("#f-priority"), "200"),
			chromedp.Click(chromedp.CSS("#submit-btn")))
		b.wait("validation message", `(document.querySelector("#submit-error")?.textContent || "").startsWith("priority: must be between 0 and 100")`)
		b.wait("field highlighted", `document.querySelector("#f-priority").classList.contains("invalid")`)
		b.shot("submit")
		b.run("fix and submit",
			chromedp.SetValue(chromedp.CSS("#f-priority"), ""),
			chromedp.SendKeys(chromedp.CSS("#f-name"), "ui-hello"),
			chromedp.Click(chromedp.CSS("#submit-btn")))
		b.wait("job page", `location.pathname.startsWith("/ui/jobs/") && !!document.querySelector("#job-state")`)
		b.wait("succeeded without a reload", `document.querySelector("#job-state").textContent === "succeeded"`)
		b.wait("log line", `(document.querySelector("pre.log")?.textContent || "").includes("hello-from-ui")`)
		okID = eval[string](b, `location.pathname.slice("/ui/jobs/".length)`)
		b.wait("timeline has the success", `document.querySelector("#timeline").textContent.includes("job.succeeded")`)
		b.shot("job")
		if j, err := getJob(leader, okID); err != nil || j.Job.State != "succeeded" {
			t.Fatalf("the API disagrees: %v %v", j, err)
		}
	})

	t.Run("deep link reload", func(t *testing.T) {
		b.t = t
		b.open(via.url("/ui/jobs/"+okID), "#job-state")
		b.wait("state shown", `document.querySelector("#job-state").textContent === "succeeded"`)
	})

	t.Run("a failed job: stderr first, the command as typed, what each time counts", func(t *testing.T) {
		b.t = t
		command := []string{"sh", "-c", "echo out-line; echo err-line >&2; exit 3"}
		id := submitJob(t, leader, map[string]any{"name": "ui-fails", "command": command, "max_attempts": 1})
		waitJobState(t, leader, id, "failed")
		b.open(via.url("/ui/jobs/"+id), "#job-state")
		// Its output went to stderr: the log opens there.
		b.wait("stderr chosen", `document.querySelector('select[aria-label="Stream"]').value === "stderr"`)
		b.wait("the error line", `(document.querySelector("pre.log")?.textContent || "").includes("err-line")`)
		if got, want := eval[string](b, `document.querySelector("#job-command")?.textContent || ""`), `sh -c 'echo out-line; echo err-line >&2; exit 3'`; got != want {
			t.Errorf("command shown as %q, want %q", got, want)
		}
		type times struct{ Job, JobTitle, Attempt, AttemptTitle string }
		got := eval[times](b, `(() => { const dt = [...document.querySelectorAll("dl.kv dt")].find((x) => x.textContent === "Submit → finish");
			const th = [...document.querySelectorAll("#attempts th")].find((x) => x.textContent === "Start → finish");
			return { Job: dt?.textContent || "", JobTitle: dt?.title || "", Attempt: th?.textContent || "", AttemptTitle: th?.title || "" }; })()`)
		if !strings.HasPrefix(got.JobTitle, "From submit to the end of the last attempt") || !strings.HasPrefix(got.AttemptTitle, "This attempt alone") {
			t.Errorf("the times do not say what they count: %+v", got)
		}
		// A stream the user picks stays picked.
		eval[bool](b, `(() => { const s = document.querySelector('select[aria-label="Stream"]'); s.value = "stdout"; return s.dispatchEvent(new Event("change")); })()`)
		b.wait("stdout shown", `(document.querySelector("pre.log")?.textContent || "").includes("out-line")`)
	})

	t.Run("cancel a running job", func(t *testing.T) {
		b.t = t
		id := submitJob(t, leader, map[string]any{"name": "ui-sleeper", "command": []string{"sleep", "300"}})
		b.open(via.url("/ui/jobs/"+id), "#job-state")
		b.wait("running", `document.querySelector("#job-state").textContent === "running"`)
		b.run("cancel", chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitVisible(chromedp.CSS("dialog [data-confirm]")),
			chromedp.Click(chromedp.CSS("dialog [data-confirm]")))
		b.wait("cancelled", `document.querySelector("#job-state").textContent === "cancelled"`)
		waitJobState(t, leader, id, "cancelled")
	})

	t.Run("hostile names and logs are text", func(t *testing.T) {
		b.t = t
		name := `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`
		script := `printf '<script>window.__pwned=3</script>\n\033[31mred-text\033[0m\n'; head -c 1048576 /dev/zero | tr '\0' a; echo; echo done-marker`
		id := submitJob(t, leader, map[string]any{"name": name, "command": script, "labels": map[string]string{"note": "<b>bold</b>"}})
		waitJobState(t, leader, id, "succeeded")
		b.open(via.url("/ui/jobs?name="+strings.ReplaceAll(name[:4], "<", "%3C")), "#jobs tbody tr[data-job]")
		b.wait("name shown as text", `document.querySelector('tr[data-job=`+jsStr(id)+`] td.name').textContent === `+jsStr(name))
		b.wait("label shown as text", `document.querySelector('tr[data-job=`+jsStr(id)+`] td.labels').textContent === "note=<b>bold</b>"`)
		b.open(via.url("/ui/jobs/"+id), "#job-state")
		b.wait("whole log read", `(document.querySelector("pre.log")?.textContent || "").includes("done-marker")`)
		type hostile struct {
			Pwned   bool `json:"pwned"`
			Imgs    int  `json:"imgs"`
			Scripts bool `json:"scripts"`
			Red     bool `json:"red"`
			Esc     bool `json:"esc"`
			Cut     bool `json:"cut"`
			Len     int  `json:"len"`
			Title   string
		}
		got := eval[hostile](b, `(() => { const log = document.querySelector("pre.log").textContent; return {
			pwned: window.__pwned !== undefined, imgs: document.querySelectorAll("img").length,
			scripts: log.includes("<script>window.__pwned=3</script>"), red: log.includes("red-text"), esc: log.includes("\x1b"),
			cut: log.includes("1,044,480 more characters"), len: log.length, Title: document.querySelector("h1.jobname").textContent }; })()`)
		if got.Pwned || got.Imgs != 0 || !got.Scripts || !got.Red || got.Esc || !got.Cut || got.Len > 20000 || got.Title != name {
			t.Fatalf("hostile content not shown as plain text: %+v", got)
		}
	})

	t.Run("artifacts download, namespace filter", func(t *testing.T) {
		b.t = t
		id := submitJob(t, leader, map[string]any{"name": "ui-artifacts", "namespace": "ui-team",
			"command": `mkdir -p "$FOREMAN_ARTIFACTS/out" && printf 'artifact-<b>body</b>' > "$FOREMAN_ARTIFACTS/out/a.txt"`})
		waitJobState(t, leader, id, "succeeded")
		// The default listing is the default namespace; "*" is all of them.
		b.open(via.url("/ui/jobs?namespace=ui-team"), `#jobs tr[data-job=`+jsStr(id)+`]`)
		b.open(via.url("/ui/jobs?namespace=*"), `#jobs tr[data-job=`+jsStr(id)+`]`)
		b.wait("namespace shown", `document.querySelector('tr[data-job=`+jsStr(id)+`] .ns').textContent.includes("ui-team")`)
		b.open(via.url("/ui/jobs"), "#jobs tbody tr")
		if eval[bool](b, `!!document.querySelector('tr[data-job=`+jsStr(id)+`]')`) {
			t.Fatal("a job of namespace ui-team is listed in the default namespace")
		}
		dir := t.TempDir()
		if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir}); err != nil {
			t.Fatal(err)
		}
		b.open(via.url("/ui/jobs/"+id), `#artifacts tr[data-artifact="out/a.txt"]`)
		b.run("download", chromedp.Click(chromedp.CSS(`#artifacts tr[data-artifact="out/a.txt"] button`)))
		eventually(t, stepTimeout, "the artifact downloaded", func() error {
			got, err := os.ReadFile(filepath.Join(dir, "a.txt"))
			if err != nil {
				return err
			}
			if string(got) != "artifact-<b>body</b>" {
				return fmt.Errorf("downloaded %q", got)
			}
			return nil
		})
	})

	t.Run("a job after another: each parent's requirement and the decision", func(t *testing.T) {
		b.t = t
		parent := submitJob(t, leader, map[string]any{"name": "ui-parent", "command": "true", "max_attempts": 1})
		child := submitJob(t, leader, map[string]any{"name": "ui-after", "command": "true", "after": []string{parent + ":failed"}})
		waitJobState(t, leader, child, "cancelled")
		b.open(via.url("/ui/jobs/"+child), "#job-deps")
		want := parent + " (failed) · cancelled by " + parent
		b.wait("requirement and decision shown", `document.querySelector("#job-deps").textContent === `+jsStr(want))
		b.wait("the reason", `document.body.textContent.includes("dependency after `+parent+`:failed cannot be met: job `+parent+` is succeeded")`)
	})

	t.Run("an array: progress in the list, a grid of its tasks", func(t *testing.T) {
		b.t = t
		id := submitJob(t, leader, map[string]any{"name": "ui-array", "command": `[ "$FOREMAN_ARRAY_INDEX" != 3 ]`, "max_attempts": 1, "array": "0-11%4"})
		waitJobState(t, leader, id, "failed")
		b.open(via.url("/ui/jobs/"+id), "#job-array")
		b.wait("12 squares, one failed, the rest succeeded", `document.querySelectorAll("#task-grid .cell").length === 12 && document.querySelectorAll("#task-grid .cell.s-failed").length === 1 && document.querySelector('#task-grid .cell[data-index="3"]').classList.contains("s-failed") && document.querySelectorAll("#task-grid .cell.s-succeeded").length === 11`)
		b.wait("failed indexes and progress", `document.body.textContent.includes("Failed indexes") && document.querySelector("#job-array .array-progress").textContent === "12/12"`)
		b.shot("job-array")
		b.run("open the failed task", chromedp.Click(chromedp.CSS(`#task-grid .cell[data-index="3"]`)))
		b.wait("the task's page links back", `document.querySelector("#job-array-task") && document.querySelector("#job-array-task").textContent === "index 3 of `+id+`"`)
		b.open(via.url("/ui/jobs?name=ui-array"), "#jobs tbody tr[data-job]")
		b.wait("one row with its progress", `document.querySelectorAll("#jobs tbody tr[data-job]").length === 1 && document.querySelector("#jobs .array-progress").textContent === "12/12"`)
	})

	t.Run("gang tasks", func(t *testing.T) {
		b.t = t
		id := submitJob(t, leader, map[string]any{"name": "ui-gang", "command": "sleep 300", "gang": map[string]any{"size": 2}})
		b.open(via.url("/ui/jobs/"+id), "#job-state")
		b.wait("two tasks, running", `document.querySelectorAll("#gang-tasks tr[data-task]").length === 2 && [...document.querySelectorAll("#gang-tasks td.state")].every((td) => td.textContent === "running")`)
		b.shot("job-gang")
		b.wait("the exec line of a running job", `document.querySelector("#job-exec").textContent === "foreman exec -it `+id+` -- sh"`)
		b.run("cancel", chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitVisible(chromedp.CSS("dialog [data-confirm]")),
			chromedp.Click(chromedp.CSS("dialog [data-confirm]")))
		b.wait("tasks follow", `[...document.querySelectorAll("#gang-tasks td.state")].every((td) => td.textContent !== "running")`)
	})

	t.Run("jobs list is live", func(t *testing.T) {
		b.t = t
		b.open(via.url("/ui/jobs"), "#jobs tbody tr[data-job]")
		submitJob(t, leader, map[string]any{"name": "ui-late", "command": "true"})
		b.wait("new-jobs banner", `!document.querySelector(".notice").hidden && document.querySelector(".notice").textContent.includes("1 new job")`)
		b.shot("jobs")
	})

	t.Run("workflow DAG", func(t *testing.T) {
		b.t = t
		var wf struct {
			ID string `json:"id"`
		}
		err := postJSON(leader.url("/v1/workflows"), map[string]any{"name": "ui-etl", "jobs": []map[string]any{
			{"name": "extract", "command": "sleep 0.5"},
			{"name": "transform", "depends_on": []string{"extract"}, "command": "true"},
			{"name": "load", "depends_on": []string{"transform"}, "command": "true"},
			{"name": "audit", "depends_on": []string{"extract"}, "command": "exit 3", "max_attempts": 1},
			{"name": "alert", "depends_on": []string{"audit"}, "condition": "failure", "command": "true"},
		}}, &wf)
		if err != nil {
			t.Fatal(err)
		}
		b.open(via.url("/ui/workflows/"+wf.ID), "svg.dag")
		b.wait("5 nodes, 4 edges", `document.querySelectorAll("svg.dag g.node").length === 5 && document.querySelectorAll("svg.dag path.edge").length === 4`)
		b.wait("states coloured live", `document.querySelector('g[data-key="load"]').classList.contains("s-succeeded") && document.querySelector('g[data-key="audit"]').classList.contains("s-failed") && document.querySelector('g[data-key="alert"]').classList.contains("s-succeeded")`)
		b.shot("workflow")
	})

	t.Run("schedule trigger", func(t *testing.T) {
		b.t = t
		if err := postJSON(leader.url("/v1/schedules"), map[string]any{"name": "ui-nightly", "cron": "30 2 * * *", "time_zone": "Europe/Berlin",
			"job": map[string]any{"command": "true"}}, nil); err != nil {
			t.Fatal(err)
		}
		b.open(via.url("/ui/schedules"), `tr[data-schedule="ui-nightly"]`)
		b.run("trigger", chromedp.Click(chromedp.CSS(`tr[data-schedule="ui-nightly"] .actions button:last-child`)))
		b.wait("fired once", `document.querySelector('tr[data-schedule="ui-nightly"]').children[5].textContent === "1"`)
		b.shot("schedules")
	})

	t.Run("usage", func(t *testing.T) {
		b.t = t
		id := submitJob(t, leader, map[string]any{"command": "true", "namespace": "ui-usage"})
		waitJobState(t, leader, id, "succeeded")
		b.open(via.url("/ui/usage?since=24h"), "#usage")
		// The row appears once the finish is applied on the node asked;
		// a reload re-reads (the page refreshes every minute on its own).
		eventually(t, systemTimeout, "the namespace's usage row", func() error {
			b.open(via.url("/ui/usage?since=24h"), "#usage tbody tr")
			if eval[bool](b, `!!document.querySelector('#usage tr[data-key="ui-usage"]')`) {
				return nil
			}
			return fmt.Errorf("no row for ui-usage")
		})
		b.wait("one attempt", `document.querySelector('#usage tr[data-key="ui-usage"]').children[1].textContent === "1"`)
		b.wait("the chart draws used and requested", `document.querySelectorAll("#usage-chart polyline.line").length === 2`)
		b.wait("nav marks the page", `document.querySelector('[data-nav="usage"]').getAttribute("aria-current") === "page"`)
		b.shot("usage")
	})

	t.Run("drain a node", func(t *testing.T) {
		b.t = t
		target := c.others(via, leader)[0].name
		b.open(via.url("/ui/nodes"), `tr[data-node="`+target+`"]`)
		// Used, as the node measures it (asked through another node,
		// which proxies): a bar when the node has a jobs cgroup, else a
		// note saying it is not measured.
		var u struct {
			Node   string   `json:"node"`
			Memory *int64   `json:"memory_bytes"`
			CPU    *float64 `json:"cpu_seconds_total"`
		}
		if err := getJSON(via.url("/v1/nodes/"+target+"/usage"), &u); err != nil || u.Node != target {
			t.Fatalf("usage of %s through %s: %+v %v", target, via.name, u, err)
		}
		if u.Memory != nil && u.CPU != nil {
			b.wait("used bars", `!!document.querySelector('tr[data-node="`+target+`"] .bar.used-mem') && !!document.querySelector('tr[data-node="`+target+`"] .bar.used-cpu')`)
		} else {
			t.Logf("%s measures no usage (no jobs cgroup): %+v", target, u)
			b.wait("not measured", `document.querySelector('tr[data-node="`+target+`"] td.capcell').textContent.includes("not measured")`)
		}
		b.shot("nodes")
		b.run("drain", chromedp.Click(`tr[data-node="`+target+`"] button[data-action=drain]`),
			chromedp.WaitVisible(chromedp.CSS("dialog [data-confirm]")), chromedp.Click(chromedp.CSS("dialog [data-confirm]")))
		b.wait("draining shown", `document.querySelector('tr[data-node="`+target+`"] td.elig').textContent.startsWith("draining")`)
		var n struct {
			Eligibility string `json:"eligibility"`
		}
		if err := getJSON(leader.url("/v1/nodes/"+target), &n); err != nil || n.Eligibility != "draining" {
			t.Fatalf("node %s: %+v %v", target, n, err)
		}
	})

	t.Run("cluster and overview screenshots", func(t *testing.T) {
		b.t = t
		b.open(via.url("/ui/cluster"), "#raft-servers")
		b.wait("3 raft servers", `document.querySelectorAll("#raft-servers tbody tr").length === 3`)
		b.wait("the fair share table", `document.querySelector("#fair-share") !== null`)
		b.shot("cluster")
		b.open(ui, "#counts .card")
		b.wait("charts", `document.querySelectorAll("figure.spark").length === 3`)
		b.shot("overview")
		// Dark mode follows the system setting.
		dark := func(on bool) {
			v := "light"
			if on {
				v = "dark"
			}
			if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}}); err != nil {
				t.Fatal(err)
			}
		}
		dark(true)
		defer dark(false)
		b.wait("dark background", `getComputedStyle(document.body).backgroundColor === "rgb(16, 20, 27)"`)
		b.shot("overview-dark")
	})

	t.Run("eight tabs share one event stream", func(t *testing.T) {
		b.t = t
		// A stream per tab would hold six connections by the sixth tab and
		// leave the seventh tab's page load waiting (HTTP/1.1, six per
		// server). The tabs elect one holder (Web Locks) that fans the
		// events out (BroadcastChannel); all eight load and stay live.
		b.open(via.url("/ui/jobs"), "#jobs tbody tr[data-job]")
		tabs := []*browser{b}
		for i := 1; i < 8; i++ {
			tb, cancel := b.tab()
			tb.t = t
			defer cancel()
			tb.open(via.url("/ui/jobs"), "#jobs tbody tr[data-job]")
			tabs = append(tabs, tb)
		}
		holders := func() (idx []int) {
			for i, tb := range tabs {
				if tb == nil {
					continue
				}
				tb.wait("live", `document.querySelector("#live").classList.contains("live") && window.foremanStats.mode === "shared"`)
				if eval[bool](tb, `window.foremanStats.holder`) {
					idx = append(idx, i)
				}
			}
			return idx
		}
		h := holders()
		if len(h) != 1 {
			t.Fatalf("%d tabs hold a stream (%v), want 1", len(h), h)
		}
		submitJob(t, leader, map[string]any{"name": "ui-eight-tabs", "command": "true"})
		for i, tb := range tabs {
			tb.wait(fmt.Sprintf("tab %d hears of the submit", i+1), `!document.querySelector(".notice").hidden && document.querySelector(".notice").textContent.includes("1 new job")`)
		}
		b.shot("jobs-eight-tabs")
		// The holder leaves: another tab takes the stream over, resuming
		// from the last event it was handed, and every tab keeps hearing
		// events.
		gone := h[0]
		tabs[gone].run("the holder leaves", chromedp.Navigate("about:blank"))
		tabs[gone] = nil
		eventually(t, stepTimeout, "another tab holds the stream", func() error {
			if h := holders(); len(h) != 1 {
				return fmt.Errorf("holders %v", h)
			}
			return nil
		})
		submitJob(t, leader, map[string]any{"name": "ui-eight-tabs-2", "command": "true"})
		for i, tb := range tabs {
			if tb != nil {
				tb.wait(fmt.Sprintf("tab %d hears the second submit", i+1), `document.querySelector(".notice").textContent.includes("2 new jobs")`)
			}
		}
	})

	t.Run("lost connection: banner, then resume", func(t *testing.T) {
		b.t = t
		b.open(via.url("/ui/jobs"), "#jobs tbody tr[data-job]")
		b.wait("live", `document.querySelector("#live").classList.contains("live")`)
		via.kill9()
		b.wait("the banner", `!document.querySelector("#banner").hidden && document.querySelector("#banner").textContent.includes("reconnecting")`)
		b.shot("disconnected")
		submitJob(t, leader, map[string]any{"name": "ui-while-away", "command": "true"}) // missed while away
		via.restart(t)
		b.wait("live again, banner gone", `document.querySelector("#live").classList.contains("live") && document.querySelector("#banner").hidden`)
		// Resumed from the last event: the submit made while away is
		// announced (or, if the restarted node's ring no longer holds our
		// position, the list says it is stale).
		b.wait("the missed submit", `!document.querySelector(".notice").hidden`)
	})

	t.Run("assets served well", func(t *testing.T) {
		b.t = t
		asset := eval[string](b, `document.querySelector('script[type=module]').getAttribute("src")`)
		req, _ := http.NewRequest("GET", via.url(asset), nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
			t.Fatalf("%s: %v", asset, resp.Header)
		}
	})
}
