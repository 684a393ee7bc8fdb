package systest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// TestSystemWorkflow runs a workflow on three real agents: a diamond with
// a failing branch (the success child is skipped by it, the failure and
// always children run), a result handed from parent to child across
// nodes (a on n1 → c on n2 → f on n3), and a retry of the failed
// workflow that re-runs the failed and skipped jobs and keeps the rest.
func TestSystemWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	bin := foremanBin(t)
	root := t.TempDir()
	var agents []*agentProc
	first := freeBase(t)
	for i := 1; i <= 3; i++ {
		base := first
		if i > 1 {
			base = freeBase(t)
		}
		extra := []string{"--bootstrap-expect", "3", "--label", fmt.Sprintf("host=%d", i)}
		if i > 1 {
			extra = append(extra, "--join", fmt.Sprintf("127.0.0.1:%d", first))
		}
		name := fmt.Sprintf("wf%d", i)
		agents = append(agents, startAgent(t, bin, name, filepath.Join(root, name, "data"), base, extra...))
	}
	cl := apiClient(t, agents[1].url(""), cli.ClientConfig{})
	ctx := context.Background()
	eventually(t, systemTimeout, "three eligible nodes", func() error {
		var nodes struct {
			Nodes []fsm.Node `json:"nodes"`
		}
		if err := getJSON(agents[0].url("/v1/nodes"), &nodes); err != nil {
			return err
		}
		if len(nodes.Nodes) != 3 {
			return fmt.Errorf("%d nodes", len(nodes.Nodes))
		}
		return nil
	})

	marker := filepath.Join(root, "b-may-succeed")
	job := func(name, host, script string, deps []string, cond string) httpapi.JobSpecInput {
		one := 1
		return httpapi.JobSpecInput{
			Name: name, Command: httpapi.JSONString(script), Driver: "process", MaxAttempts: &one,
			Constraints: []string{"host == " + host}, DependsOn: deps, Condition: cond,
		}
	}
	wf := httpapi.WorkflowInput{Name: "system", Jobs: []httpapi.JobSpecInput{
		job("a", "1", `printf "from-a@$FOREMAN_NODE" > "$FOREMAN_RESULT" && mkdir -p "$FOREMAN_ARTIFACTS/out" &&
			printf "artifact-of-a" > "$FOREMAN_ARTIFACTS/out/data.txt" && printf x > "$FOREMAN_ARTIFACTS/top" &&
			ln -s /etc/passwd "$FOREMAN_ARTIFACTS/evil"`, nil, ""),
		job("b", "2", "test -e "+marker, []string{"a"}, ""),
		job("c", "2", `cat "$FOREMAN_INPUTS/a/result" > "$FOREMAN_RESULT" && printf " via $FOREMAN_NODE" >> "$FOREMAN_RESULT" &&
			printf " +%s" "$(cat "$FOREMAN_INPUTS/a/artifacts/out/data.txt")" >> "$FOREMAN_RESULT" && test ! -e "$FOREMAN_INPUTS/a/artifacts/evil"`, []string{"a"}, ""),
		job("d", "3", "true", []string{"b", "c"}, ""),
		job("e", "3", "true", []string{"b"}, "failure"),
		job("f", "3", `cat "$FOREMAN_INPUTS/c/result" > "$FOREMAN_RESULT"`, []string{"c"}, ""),
		job("g", "1", "true", []string{"d"}, "always"),
	}}
	var sub *api.WorkflowSubmitResponse
	eventually(t, systemTimeout, "submit the workflow", func() error {
		var err error
		sub, err = submitWorkflow(ctx, cl, wf)
		return err
	})
	status := func(want fsm.WorkflowState) map[string]httpapi.WorkflowJobStatus {
		t.Helper()
		var d *httpapi.WorkflowDetail
		eventually(t, systemTimeout, "workflow "+string(want), func() error {
			var err error
			if d, err = workflowAll(ctx, cl, sub.ID); err != nil {
				return err
			}
			if d.State != want {
				return fmt.Errorf("workflow is %s: %+v", d.State, d.JobList)
			}
			return nil
		})
		out := map[string]httpapi.WorkflowJobStatus{}
		for _, j := range d.JobList {
			out[j.Name] = j
		}
		return out
	}
	st := status(fsm.WorkflowFailed)
	want := map[string]fsm.JobState{"a": fsm.JobSucceeded, "b": fsm.JobFailed, "c": fsm.JobSucceeded, "d": fsm.JobSkipped,
		"e": fsm.JobSucceeded, "f": fsm.JobSucceeded, "g": fsm.JobSucceeded}
	for name, s := range want {
		if st[name].State != s {
			t.Errorf("%s: %s (%s), want %s", name, st[name].State, st[name].Reason, s)
		}
	}
	if d := st["d"]; d.Decision != fsm.DecisionSkipped || d.DecidedBy != "b" || d.Attempts != 0 {
		t.Errorf("d's edge: %+v", d)
	}
	if e := st["e"]; e.Decision != fsm.DecisionReleased || e.DecidedBy != "b" {
		t.Errorf("e's edge: %+v", e)
	}
	// The result crossed two nodes: written on wf1, read and extended on wf2, read on wf3.
	res, err := cl.JobResult(ctx, st["f"].ID)
	if err != nil || string(res) != "from-a@wf1 via wf2 +artifact-of-a" {
		t.Errorf("f's result (with a's artifact fetched by wf2 from wf1): %q, %v", res, err)
	}
	checkArtifacts(t, bin, agents, st["a"].ID)
	// Invariant 4 on real timestamps: each child started after its
	// deciding parent's attempt finished.
	for child, parent := range map[string]string{"c": "a", "e": "b", "f": "c", "g": "a"} {
		cj, err := getJob(agents[0], st[child].ID)
		if err != nil {
			t.Fatal(err)
		}
		pj, err := getJob(agents[0], st[parent].ID)
		if err != nil {
			t.Fatal(err)
		}
		if c, p := cj.latest(), pj.latest(); c == nil || p == nil || c.StartedAt.Before(p.FinishedAt) {
			t.Errorf("%s started %v, before its parent %s finished %v", child, c, parent, p)
		}
	}

	// Retry: b now succeeds, so d runs; a, c, e, f, g are kept.
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RetryWorkflow(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
	st = status(fsm.WorkflowSucceeded)
	for name, n := range map[string]int{"a": 1, "b": 2, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1} {
		if st[name].Attempts != n || st[name].State != fsm.JobSucceeded {
			t.Errorf("after retry %s: %s with %d attempts, want succeeded with %d", name, st[name].State, st[name].Attempts, n)
		}
	}
	if d := st["d"]; d.Decision != fsm.DecisionReleased || d.DecidedBy != "c" && d.DecidedBy != "b" {
		t.Errorf("d's edge after retry: %+v", d)
	}

	// The CLI with the README's example: submit, status (table and
	// --json, flags after the argument), ls, and a Slurm-style submit.
	addr := agents[2].url("")
	r := runForeman(t, bin, addr, "workflow", "submit", "-f", "testdata/workflows/etl.yaml")
	if r.code != 0 {
		t.Fatalf("workflow submit: %d %s", r.code, r.stderr)
	}
	etl := strings.TrimSpace(r.stdout)
	var d httpapi.WorkflowDetail
	eventually(t, systemTimeout, "etl succeeded", func() error {
		r := runForeman(t, bin, addr, "workflow", "status", etl, "--json")
		if r.code != 0 {
			return fmt.Errorf("status: %d %s", r.code, r.stderr)
		}
		d = httpapi.WorkflowDetail{}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			return err
		}
		if d.State != fsm.WorkflowSucceeded {
			return fmt.Errorf("etl is %s", d.State)
		}
		return nil
	})
	byName := map[string]httpapi.WorkflowJobStatus{}
	for _, j := range d.JobList {
		byName[j.Name] = j
	}
	if byName["notify-failure"].State != fsm.JobSkipped || byName["notify-failure"].DecidedBy == "" {
		t.Errorf("notify-failure: %+v", byName["notify-failure"])
	}
	if res, err := cl.JobResult(ctx, byName["transform"].ID); err != nil || string(res) != "users=42\norders=7\n" {
		t.Errorf("transform's result: %q %v", res, err)
	}
	if r := runForeman(t, bin, addr, "workflow", "status", etl); r.code != 0 || !strings.Contains(r.stdout, "released by transform") {
		t.Errorf("status table: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runForeman(t, bin, addr, "workflow", "ls"); r.code != 0 || !strings.Contains(r.stdout, etl) || !strings.Contains(r.stdout, "etl") {
		t.Errorf("workflow ls: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// Retry re-runs the skipped notify-failure, which its succeeded
	// parents skip again at once: the workflow stays succeeded.
	if r := runForeman(t, bin, addr, "workflow", "retry", etl); r.code != 0 || !strings.Contains(r.stdout, "is succeeded") {
		t.Errorf("retry of the etl workflow: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = runForeman(t, bin, addr, "submit", "--driver", "process", "--depends-on", byName["load"].ID, "--condition", "always", "--", "true")
	if r.code != 0 {
		t.Fatalf("submit --depends-on: %d %s", r.code, r.stderr)
	}
	waitJobState(t, agents[0], strings.TrimSpace(r.stdout), "succeeded")
	if r := runForeman(t, bin, addr, "submit", "--depends-on", "01NOSUCHJOB", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "no job") {
		t.Errorf("submit with an unknown parent: %d %s", r.code, r.stderr)
	}

	// A schedule that fires a workflow (the testdata example), triggered
	// now: the workflow runs, extract's artifact reaches transform.
	if r := runForeman(t, bin, addr, "schedule", "create", "-f", "testdata/schedules/nightly-etl.yaml"); r.code != 0 {
		t.Fatalf("schedule create: %d %s", r.code, r.stderr)
	}
	r = runForeman(t, bin, addr, "schedule", "trigger", "nightly-etl", "--json")
	var trig httpapi.TriggerResponse
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &trig) != nil || !trig.Workflow {
		t.Fatalf("schedule trigger: %d %s %s", r.code, r.stdout, r.stderr)
	}
	eventually(t, systemTimeout, "the scheduled workflow succeeded", func() error {
		d, err := workflowAll(ctx, cl, trig.JobID)
		if err != nil {
			return err
		}
		if d.State != fsm.WorkflowSucceeded {
			return fmt.Errorf("workflow is %s: %+v", d.State, d.JobList)
		}
		if res, err := cl.JobResult(ctx, d.JobList[1].ID); err != nil || strings.TrimSpace(string(res)) != "1" {
			return fmt.Errorf("transform's result %q %v", res, err)
		}
		return nil
	})
	if r := runForeman(t, bin, addr, "schedule", "status", "nightly-etl"); r.code != 0 || !strings.Contains(r.stdout, "workflow "+trig.JobID) {
		t.Errorf("schedule status: %d %s %s", r.code, r.stdout, r.stderr)
	}

	// The only copy of a's artifacts is on wf1: with wf1 down, the error
	// says so by name.
	agents[0].kill9()
	r = runForeman(t, bin, addr, "artifacts", "get", st["a"].ID, "top", "-o", "-")
	if r.code == 0 || !strings.Contains(r.stderr, "wf1") {
		t.Errorf("artifact on a dead node: %d %q", r.code, r.stderr)
	}
}

// checkArtifacts checks the artifacts of job a (run on wf1, which wrote
// out/data.txt, top and a symlink out): listed from any node without the
// symlink, downloaded through wf3 (proxied to wf1) by the API and the CLI,
// and a path that escapes the directory refused.
func checkArtifacts(t *testing.T, bin string, agents []*agentProc, id string) {
	t.Helper()
	ctx := context.Background()
	via := apiClient(t, agents[2].url(""), cli.ClientConfig{})
	l, err := via.ListArtifacts(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Node != "wf1" || len(l.Artifacts) != 2 || l.Artifacts[0] != (api.Artifact{Path: "out/data.txt", Size: 13}) ||
		l.Artifacts[1] != (api.Artifact{Path: "top", Size: 1}) || !strings.Contains(l.Warning, "not regular files") {
		t.Errorf("artifact list: %+v", l)
	}
	var buf strings.Builder
	if _, err := via.GetArtifact(ctx, id, 0, "out/data.txt", &buf); err != nil || buf.String() != "artifact-of-a" {
		t.Errorf("artifact through wf3: %q %v", buf.String(), err)
	}
	for _, bad := range []string{"..%2F..%2F..%2Fetc%2Fpasswd", "evil", "out%2F..%2F..%2Ftask.json"} {
		resp, err := http.Get(agents[2].url("/v1/jobs/" + id + "/artifacts/" + bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET artifact %s: %d, want 400 or 404", bad, resp.StatusCode)
		}
	}
	dir := t.TempDir()
	addr := agents[1].url("")
	r := runForeman(t, bin, addr, "artifacts", "get", id, "-o", dir, "--json")
	if r.code != 0 {
		t.Fatalf("artifacts get: %d %s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "data.txt")); err != nil || string(b) != "artifact-of-a" {
		t.Errorf("artifacts get wrote %q %v", b, err)
	}
	if r := runForeman(t, bin, addr, "job", "status", id); r.code != 0 || !strings.Contains(r.stdout, "Artifacts of attempt 1: 2 files, 14 bytes on node wf1") {
		t.Errorf("job status: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runForeman(t, bin, addr, "artifacts", "ls", id); r.code != 0 || !strings.Contains(r.stdout, "out/data.txt") {
		t.Errorf("artifacts ls: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runForeman(t, bin, addr, "artifacts", "get", id, "../x"); r.code != 2 || !strings.Contains(r.stderr, "escapes") {
		t.Errorf("artifacts get ../x: %d %s", r.code, r.stderr)
	}
}
