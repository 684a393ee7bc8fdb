package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

func TestListJobsFiltersAndPages(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		team := "a"
		if i%2 == 1 {
			team = "b"
		}
		ids = append(ids, a.submit(fmt.Sprintf(`{"name":"build-%d","command":"true","labels":{"team":%q}}`, i, team)))
	}
	other := a.submit(`{"name":"deploy","command":"true","queue":"ops"}`)
	if _, err := a.client.CancelJob(ctx, ids[0], ""); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		q    api.JobQuery
		want []string // newest first
	}{
		{"all", api.JobQuery{}, []string{other, ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}},
		{"label", api.JobQuery{Labels: map[string]string{"team": "b"}}, []string{ids[5], ids[3], ids[1]}},
		{"name prefix", api.JobQuery{Name: "dep"}, []string{other}},
		{"queue", api.JobQuery{Queue: "ops"}, []string{other}},
		{"queue and state", api.JobQuery{Queue: "ops", State: api.JobCancelled}, nil},
		{"state", api.JobQuery{State: api.JobCancelled}, []string{ids[0]}},
		{"state and label", api.JobQuery{State: api.JobQueued, Labels: map[string]string{"team": "a"}}, []string{ids[6], ids[4], ids[2]}},
		{"paged", api.JobQuery{Limit: 3}, []string{other, ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}},
		{"paged label", api.JobQuery{Limit: 1, Labels: map[string]string{"team": "b"}}, []string{ids[5], ids[3], ids[1]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			q := tc.q
			for page := 0; ; page++ {
				if page > 20 {
					t.Fatal("pagination does not end")
				}
				l, err := a.client.ListJobs(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if q.Limit > 0 && len(l.Jobs) > q.Limit {
					t.Fatalf("page of %d jobs, limit %d", len(l.Jobs), q.Limit)
				}
				for _, j := range l.Jobs {
					got = append(got, j.ID)
				}
				if l.NextCursor == "" {
					break
				}
				q.Cursor = l.NextCursor
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
		})
	}

	counts, err := a.client.JobCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Total != 8 || counts.Counts[api.JobCancelled] != 1 || counts.Counts[api.JobQueued] != 7 || len(counts.Counts) != len(fsm.AllStates) {
		t.Fatalf("counts: %+v", counts)
	}

	bad := []struct{ query, field string }{
		{"state=sleeping", "state:"},
		{"limit=0", "limit:"},
		{"limit=abc", "limit:"},
		{"label=noequals", "label:"},
		{"cursor=%21%21", "cursor:"},
	}
	for _, tc := range bad {
		code, body := a.do("GET", "/v1/jobs?"+tc.query, "")
		if code != http.StatusBadRequest || !strings.Contains(errorOf(t, body).Error, tc.field) {
			t.Errorf("GET /v1/jobs?%s: %d %s, want 400 naming %s", tc.query, code, body, tc.field)
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	a := newTestAPI(t)
	tests := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v1/jobs/01NOPE", 404, CodeNotFound},
		{"POST", "/v1/jobs/01NOPE/cancel", 404, CodeNotFound},
		{"POST", "/v1/jobs/01NOPE/retry", 404, CodeNotFound},
		{"GET", "/v1/jobs/01NOPE/logs", 404, CodeNotFound},
		{"GET", "/v1/nodes/ghost", 404, CodeNotFound},
		{"POST", "/v1/nodes/ghost/drain", 404, CodeNotFound},
		{"POST", "/v1/nodes/ghost/eligibility", 404, CodeNotFound},
		{"GET", "/v1/nothing", 404, CodeNotFound},
		{"DELETE", "/v1/jobs", 405, CodeMethod},
		{"GET", "/v1/cluster/join", 405, CodeMethod},
	}
	for _, tc := range tests {
		body := ""
		if strings.HasSuffix(tc.path, "eligibility") {
			body = `{"eligibility":"eligible"}`
		}
		before := a.f.AppliedIndex()
		code, resp := a.do(tc.method, tc.path, body)
		if code != tc.status || errorOf(t, resp).Code != tc.code {
			t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.path, code, resp, tc.status, tc.code)
		}
		if a.f.AppliedIndex() != before {
			t.Errorf("%s %s changed state", tc.method, tc.path)
		}
	}
}

func TestCancelRetry(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	id := a.submit(`{"command":"true"}`)

	code, body := a.do("POST", "/v1/jobs/"+id+"/retry", "")
	if code != http.StatusConflict || errorOf(t, body).Code != CodeConflict {
		t.Fatalf("retry of a queued job: %d %s, want 409", code, body)
	}
	d, err := a.client.CancelJob(ctx, id, "not needed")
	if err != nil || d.Job.State != api.JobCancelled {
		t.Fatalf("cancel: %+v %v", d, err)
	}
	code, body = a.do("POST", "/v1/jobs/"+id+"/cancel", "")
	if code != http.StatusConflict {
		t.Fatalf("cancel of a cancelled job: %d %s, want 409", code, body)
	}
	d, err = a.client.RetryJob(ctx, id)
	if err != nil || d.Job.State != api.JobQueued {
		t.Fatalf("retry: %+v %v", d, err)
	}
	code, body = a.do("POST", "/v1/jobs/"+id+"/cancel", `{"reason":1}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "reason") {
		t.Fatalf("bad cancel body: %d %s", code, body)
	}
}

func TestGetJobWithAttempts(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "", 4000, 4096)
	id := a.submit(`{"command":"true","resources":{"cpu":500}}`)
	tok := a.place(id, "n1")
	d, err := jobDetail(context.Background(), a.client, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Job.State != fsm.JobRunning || len(d.Attempts) != 1 || d.Attempts[0].Node != "n1" || d.Attempts[0].FencingToken != tok {
		t.Fatalf("detail %+v", d)
	}
}
