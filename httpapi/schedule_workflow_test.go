package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestScheduleWorkflow: a schedule with a workflow template (YAML through
// the API's JSON, depends_on by name) fires a whole workflow; its status
// shows the workflow's outcome; bad templates are 400s naming the field.
func TestScheduleWorkflow(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	code, body := a.do("POST", "/v1/schedules", `{"name":"etl","cron":"@daily","workflow":{"name":"nightly-etl","jobs":[
		{"name":"extract","command":"true"},
		{"name":"load","command":"true","depends_on":["extract"],"condition":"success"}]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	trig, err := a.client.TriggerSchedule(ctx, "etl")
	if err != nil || !trig.Workflow {
		t.Fatalf("trigger: %+v %v", trig, err)
	}
	d, err := asServer[WorkflowDetail](a.client.GetWorkflow(ctx, trig.JobID))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "nightly-etl" || len(d.JobList) != 2 || d.JobList[1].Name != "load" || len(d.JobList[1].DependsOn) != 1 || d.JobList[1].DependsOn[0] != "extract" {
		t.Fatalf("fired workflow: %+v", d)
	}
	if j := a.job(d.JobList[0].ID); j.Spec.Env[fsm.EnvSchedule] != "etl" || j.Spec.Schedule != "etl" {
		t.Fatalf("fired job spec: %+v", j.Spec)
	}
	info, err := a.client.GetSchedule(ctx, "etl")
	if err != nil || len(info.Fires) != 1 || !info.Fires[0].Workflow || info.Fires[0].Outcome != string(fsm.WorkflowRunning) {
		t.Fatalf("schedule: %+v %v", info, err)
	}

	for _, tc := range []struct{ body, field, reason string }{
		{`{"name":"b1","cron":"@daily","job":{"command":"true"},"workflow":{"name":"w","jobs":[{"name":"a","command":"true"}]}}`, "workflow", "not both"},
		{`{"name":"b2","cron":"@daily"}`, "job", "is required"},
		{`{"name":"b3","cron":"@daily","workflow":{"name":"w","jobs":[{"name":"a","command":"true","depends_on":["b"]},{"name":"b","command":"true","depends_on":["a"]}]}}`, "workflow.jobs[0].depends_on", `cycle a -\u003e b -\u003e a`},
		{`{"name":"b4","cron":"@daily","workflow":{"name":"w","jobs":[{"name":"a","command":"true","depends_on":["zz"]}]}}`, "workflow.jobs[0].depends_on[0]", "no job named"},
		{`{"name":"b5","cron":"@daily","workflow":{"name":"w","jobs":[{"name":"a","command":"true","run_at":"2030-01-01T00:00:00Z"}]}}`, "workflow.jobs[0].run_at", "not allowed"},
		{`{"name":"b6","cron":"@daily","workflow":{"name":"","jobs":[{"name":"a","command":"true"}]}}`, "workflow.name", "empty"},
		{`{"name":"b7","cron":"@daily","workflow":{"name":"w","jobs":[]}}`, "workflow.jobs", "at least one"},
	} {
		code, body := a.do("POST", "/v1/schedules", tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.field) || !strings.Contains(body, tc.reason) {
			t.Errorf("%s: %d %s, want 400 naming %s (%s)", tc.body, code, body, tc.field, tc.reason)
		}
	}
}
