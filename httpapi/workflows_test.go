package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// TestWorkflowAPI: the ETL example (YAML) is accepted whole, its status
// lists every job with the edge that decided it, a failure skips the
// dependents, retry re-runs them and cancel stops the rest.
func TestWorkflowAPI(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "", 4000, 8192)
	ctx := context.Background()
	body, err := os.ReadFile("../testdata/workflows/etl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	code, resp := a.do("POST", "/v1/workflows", string(body), "Content-Type", "application/yaml")
	if code != http.StatusCreated {
		t.Fatalf("submit etl.yaml: %d %s", code, resp)
	}
	var sub WorkflowSubmitResponse
	mustJSON(t, resp, &sub)
	if len(sub.Jobs) != 6 || sub.Jobs[2].Name != "transform" {
		t.Fatalf("submit reply: %+v", sub)
	}
	id := map[string]string{}
	for _, j := range sub.Jobs {
		id[j.Name] = j.ID
	}
	finish := func(name string, ok bool) {
		t.Helper()
		tok := a.place(id[name], "n1")
		r := fsm.ReportAttempt{JobID: id[name], Attempt: a.job(id[name]).Current, FencingToken: tok, Node: "n1", State: fsm.AttemptSucceeded}
		if !ok {
			r.State = fsm.AttemptFailed
		}
		a.cluster.must(fsm.CmdReport, r)
	}
	states := func() map[string]WorkflowJobStatus {
		t.Helper()
		d, err := asServer[WorkflowDetail](a.client.GetWorkflow(ctx, sub.ID))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]WorkflowJobStatus{}
		for _, j := range d.JobList {
			out[j.Name] = j
		}
		return out
	}
	finish("extract-users", true)
	finish("extract-orders", true)
	if res, err := a.client.JobResult(ctx, id["extract-users"]); err != nil || len(res) != 0 {
		t.Fatalf("result of a job that wrote none: %q %v", res, err)
	}
	if _, err := a.client.JobResult(ctx, id["load"]); err == nil || !strings.Contains(err.Error(), "no finished attempt") {
		t.Fatalf("result of a waiting job: %v", err)
	}
	st := states()
	if tr := st["transform"]; tr.State != fsm.JobQueued || tr.Decision != fsm.DecisionReleased || tr.DecidedBy != "extract-orders" ||
		fmt.Sprint(tr.DependsOn) != "[extract-users extract-orders]" {
		t.Fatalf("transform: %+v", tr)
	}
	// One failed attempt (max_attempts defaults to 3), then failed for
	// good (as a deadline would).
	finish("transform", false)
	a.cluster.must(fsm.CmdFailJobs, fsm.FailJobs{JobIDs: []string{id["transform"]}, Reason: "deadline"})
	st = states()
	if st["load"].State != fsm.JobSkipped || st["load"].DecidedBy != "transform" || st["cleanup"].State != fsm.JobQueued ||
		st["notify-failure"].State != fsm.JobQueued || st["notify-failure"].DecidedBy != "transform" {
		t.Fatalf("after transform failed: %+v", st)
	}
	d, err := a.client.RetryWorkflow(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != api.WorkflowRunning {
		t.Fatalf("after retry: %+v", d.Workflow)
	}
	if st := states(); st["transform"].State != fsm.JobQueued || st["load"].State != fsm.JobWaiting {
		t.Fatalf("after retry: %+v", st)
	}
	d, err = a.client.CancelWorkflow(ctx, sub.ID, "enough")
	if err != nil {
		t.Fatal(err)
	}
	if d.State != api.WorkflowCancelled {
		t.Fatalf("after cancel: %+v", d.Workflow)
	}
	l, err := a.client.ListWorkflows(ctx, api.WorkflowQuery{})
	if err != nil || len(l.Workflows) != 1 || l.Workflows[0].Name != "etl" {
		t.Fatalf("list: %+v %v", l, err)
	}
	if _, err := a.client.RetryWorkflow(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("retry of an unknown workflow: %v", err)
	}
}

// TestWorkflowAPIRefusals: bad workflows get a 400 naming the field and
// store nothing.
func TestWorkflowAPIRefusals(t *testing.T) {
	a := newTestAPI(t)
	job := func(name, extra string) string {
		return fmt.Sprintf(`{"name":%q,"command":"true"%s}`, name, extra)
	}
	wf := func(jobs ...string) string { return `{"name":"w","jobs":[` + strings.Join(jobs, ",") + `]}` }
	big := make([]string, fsm.MaxWorkflowJobs+1)
	for i := range big {
		big[i] = fmt.Sprintf(`{"name":"j%d","command":"true"}`, i)
	}
	tests := []struct {
		name, body, want string
	}{
		{"cycle", wf(job("a", `,"depends_on":["c"]`), job("b", `,"depends_on":["a"]`), job("c", `,"depends_on":["b"]`)), "jobs[0].depends_on: cycle a -> c -> b -> a"},
		{"unknown name", wf(job("a", `,"depends_on":["zz"]`)), `jobs[0].depends_on[0]: no job named "zz"`},
		{"self", wf(job("a", `,"depends_on":["a"]`)), `jobs[0].depends_on[0]: "a" depends on itself`},
		{"duplicate names", wf(job("a", ""), job("a", "")), `jobs[1].name: "a" is also the name of jobs[0]`},
		{"condition", wf(job("a", ""), job("b", `,"depends_on":["a"],"condition":"maybe"`)), `jobs[1].condition: must be one of`},
		{"no name", wf(`{"command":"true"}`), "jobs[0].name: empty"},
		{"too many", wf(big...), "jobs: at most 10000 jobs per workflow (got 10001)"},
		{"no workflow name", `{"jobs":[` + job("a", "") + `]}`, "name: must not be empty"},
		{"yaml", "name: w\njobs: [{name: a, command: 'true', depends_on: [b]}]\n", `no job named "b"`},
		{"bad yaml", "name: [\n", "body: YAML"},
	}
	for _, tc := range tests {
		code, body := a.do("POST", "/v1/workflows", tc.body)
		if code != http.StatusBadRequest || !strings.Contains(errorOf(t, body).Error, tc.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.name, code, body, tc.want)
		}
	}
	if l, err := a.client.ListWorkflows(context.Background(), api.WorkflowQuery{}); err != nil || len(l.Workflows) != 0 {
		t.Fatalf("stored: %+v %v", l, err)
	}
}

// TestSubmitDependsOn: a plain submit may depend on existing job IDs; an
// unknown ID is a 400.
func TestSubmitDependsOn(t *testing.T) {
	a := newTestAPI(t)
	parent := a.submit(`{"command":"true"}`)
	child := a.submit(fmt.Sprintf(`{"command":"true","depends_on":[%q],"condition":"always"}`, parent))
	if j := a.job(child); j.State != fsm.JobWaiting || j.Spec.Condition != fsm.ConditionAlways {
		t.Fatalf("child: %+v", j)
	}
	code, body := a.do("POST", "/v1/jobs", `{"command":"true","depends_on":["01NOSUCHJOB"]}`)
	if code != http.StatusBadRequest || !strings.Contains(errorOf(t, body).Error, `depends_on: no job "01NOSUCHJOB"`) {
		t.Fatalf("unknown parent: %d %s", code, body)
	}
	code, body = a.do("POST", "/v1/jobs", `{"command":"true","condition":"failure"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "condition: needs depends_on") {
		t.Fatalf("condition alone: %d %s", code, body)
	}
	if _, err := a.client.CancelJob(context.Background(), parent, ""); err != nil {
		t.Fatal(err)
	}
	if j := a.job(child); j.State != fsm.JobQueued || j.Deps.DecidedBy != parent {
		t.Fatalf("child after the parent's cancel: %+v", j)
	}
}

// TestWorkflowIdempotency: the same key answers with the first workflow.
func TestWorkflowIdempotency(t *testing.T) {
	a := newTestAPI(t)
	body := `{"name":"w","jobs":[{"name":"a","command":"true"},{"name":"b","command":"true","depends_on":["a"]}]}`
	code, first := a.do("POST", "/v1/workflows", body, "Idempotency-Key", "k1")
	if code != http.StatusCreated {
		t.Fatalf("first: %d %s", code, first)
	}
	code, again := a.do("POST", "/v1/workflows", body, "Idempotency-Key", "k1")
	var r1, r2 WorkflowSubmitResponse
	mustJSON(t, first, &r1)
	mustJSON(t, again, &r2)
	if code != http.StatusOK || !r2.Duplicate || r2.ID != r1.ID || fmt.Sprint(r2.Jobs) != fmt.Sprint(r1.Jobs) {
		t.Fatalf("repeat: %d %+v, first %+v", code, r2, r1)
	}
	if l, err := a.client.ListWorkflows(context.Background(), api.WorkflowQuery{}); err != nil || len(l.Workflows) != 1 {
		t.Fatalf("workflows stored: %+v %v", l, err)
	}
}
