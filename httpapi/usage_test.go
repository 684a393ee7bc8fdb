package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// finishUsage runs a job of spec to success on n1: 2 s wall, cpu CPU time.
func (a *testAPI) finishUsage(spec string, cpu time.Duration) string {
	a.t.Helper()
	id := a.submit(spec)
	tok := a.place(id, "n1")
	a.cluster.must(fsm.CmdReport, fsm.ReportAttempt{JobID: id, Attempt: 1, FencingToken: tok, Node: "n1", State: fsm.AttemptSucceeded,
		StartedAt: t0.Add(-2 * time.Second), FinishedAt: t0, CPUTimeNs: cpu.Nanoseconds(), PeakMemoryB: 256 << 20})
	return id
}

func TestUsageAPI(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "127.0.0.1:1", 8000, 8192)
	a.cluster.must(fsm.CmdStartUsage, fsm.StartUsage{Labels: []string{"team"}})
	a.finishUsage(`{"command":"true","namespace":"a","user":"alice","labels":{"team":"x"},"resources":{"cpu":"1","memory":512}}`, 1500*time.Millisecond)
	a.finishUsage(`{"command":"true","namespace":"a","user":"bob","resources":{"cpu":"2","memory":512}}`, 500*time.Millisecond)
	a.finishUsage(`{"command":"true","namespace":"b","user":"alice","resources":{"cpu":"1","memory":512}}`, 1000*time.Millisecond)

	get := func(q string) UsageReport {
		t.Helper()
		code, body := a.do("GET", "/v1/usage"+q, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", q, code, body)
		}
		var r UsageReport
		mustJSON(t, body, &r)
		return r
	}
	keys := func(r UsageReport) map[string]api.UsageRow {
		m := map[string]api.UsageRow{}
		for _, row := range r.Rows {
			m[row.Key] = row
		}
		return m
	}
	r := get("?since=1h")
	if !r.Enabled || r.By != "namespace" || r.Step != "total" || len(r.Rows) != 2 {
		t.Fatalf("by namespace: %+v", r)
	}
	ns := keys(r)
	if ns["a"].Usage.Attempts != 2 || ns["a"].CPUSeconds != 2 || ns["a"].CPURequestedSeconds != 6 || ns["b"].CPUSeconds != 1 || ns["a"].WallSeconds != 4 {
		t.Fatalf("by namespace rows: %+v", r.Rows)
	}
	users := keys(get("?since=1h&by=user"))
	if users["alice"].Usage.Attempts != 2 || users["bob"].Usage.Attempts != 1 {
		t.Fatalf("by user: %+v", users)
	}
	teams := keys(get("?since=1h&by=label:team&namespace=a"))
	if len(teams) != 2 || teams["x"].Usage.Attempts != 1 || teams[""].Usage.Attempts != 1 {
		t.Fatalf("by label in a: %+v", teams)
	}
	hours := get("?since=" + t0.Add(-24*time.Hour).Format(time.DateOnly) + "&step=hour")
	if len(hours.Rows) != 2 || !hours.Rows[0].Start.Equal(t0.Truncate(time.Hour)) {
		t.Fatalf("step hour: %+v", hours.Rows)
	}
	// Nothing before since.
	if r := get("?since=" + t0.Add(time.Hour).Format(time.RFC3339) + "&until=" + t0.Add(2*time.Hour).Format(time.RFC3339)); len(r.Rows) != 0 {
		t.Fatalf("after the work: %+v", r.Rows)
	}
	code, body := a.do("GET", "/v1/usage?since=1h&format=csv", "")
	if code != http.StatusOK || !strings.HasPrefix(body, strings.Join(UsageCSVHeader, ",")+"\n") || strings.Count(body, "\n") != 3 {
		t.Fatalf("csv: %d %q", code, body)
	}
	// The Go client reads the same.
	rep, err := a.client.Usage(t.Context(), api.UsageQuery{Since: "1h", By: "user"})
	if err != nil || len(rep.Rows) != 2 {
		t.Fatalf("client: %+v %v", rep, err)
	}
}

func TestUsageAPIBadInput(t *testing.T) {
	a := newTestAPI(t)
	a.cluster.must(fsm.CmdStartUsage, fsm.StartUsage{Labels: []string{"team"}})
	before := a.f.AppliedIndex()
	for _, tc := range []struct{ q, field string }{
		{"?by=colour", "by"},
		{"?by=label:", "by"},
		{"?by=label:project", "by"},
		{"?since=yesterday", "since"},
		{"?since=400d", "since"},
		{"?since=2020-01-01", "since"},
		{"?until=soon", "until"},
		{"?since=1h&until=2h", "since"},
		{"?step=week", "step"},
		{"?namespace=-x", "namespace"},
	} {
		code, body := a.do("GET", "/v1/usage"+tc.q, "")
		if code != http.StatusBadRequest || !strings.HasPrefix(errorOf(t, body).Error, tc.field+":") {
			t.Errorf("GET %s: %d %s, want 400 naming %s", tc.q, code, body, tc.field)
		}
	}
	if a.f.AppliedIndex() != before {
		t.Error("a bad usage query changed the state")
	}
}

// A token reads the usage of the namespaces it may read; a job submitted
// with a token is accounted to the token's name.
func TestUsageAPIACL(t *testing.T) {
	a, _ := newACLAPI(t)
	a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: "n1", HTTPAddr: "127.0.0.1:1", Capacity: fsm.Resources{CPU: 8000, MemoryMB: 8192}, Drivers: []string{"process"}}})
	a.cluster.must(fsm.CmdStartUsage, fsm.StartUsage{})
	for _, ns := range []string{"a", "b"} {
		code, body := a.do("POST", "/v1/jobs", `{"command":"true","namespace":"`+ns+`","user":"nobody"}`, "Authorization", "Bearer "+secretFor("submit"))
		if code != http.StatusCreated {
			t.Fatalf("submit: %d %s", code, body)
		}
		var sr SubmitResponse
		mustJSON(t, body, &sr)
		if got := a.job(sr.ID).SubmittedBy; got != "submit" {
			t.Fatalf("submitted_by = %q, want the token's name", got)
		}
		tok := a.place(sr.ID, "n1")
		a.cluster.must(fsm.CmdReport, fsm.ReportAttempt{JobID: sr.ID, Attempt: 1, FencingToken: tok, Node: "n1", State: fsm.AttemptSucceeded, StartedAt: t0.Add(-time.Second), FinishedAt: t0})
	}
	code, body := a.send("GET", "/v1/usage?since=1h&by=user", secretFor("read-a"))
	var r UsageReport
	mustJSON(t, body, &r)
	if code != http.StatusOK || len(r.Rows) != 1 || r.Rows[0].Key != "submit" || r.Rows[0].Usage.Attempts != 1 {
		t.Fatalf("read-a: %d %s, want namespace a's one attempt, by the submitting token", code, body)
	}
	if code, body := a.send("GET", "/v1/usage?since=1h&namespace=b", secretFor("read-a")); code != http.StatusForbidden {
		t.Fatalf("read-a on b: %d %s, want 403", code, body)
	}
	if code, body := a.send("GET", "/v1/usage?since=1h&namespace=*", secretFor("read")); code != http.StatusOK || strings.Count(body, `"attempts": 1`) != 2 {
		t.Fatalf("read on *: %d %s", code, body)
	}
}
