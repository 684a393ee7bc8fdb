package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

func TestSubmitSingle(t *testing.T) {
	a := newTestAPI(t)
	code, body := a.do("POST", "/v1/jobs", `{"name":"hello","command":"echo hi","labels":{"team":"a"}}`)
	if code != http.StatusCreated {
		t.Fatalf("status %d: %s", code, body)
	}
	var r SubmitResponse
	mustJSON(t, body, &r)
	j := a.job(r.ID)
	if j.State != fsm.JobQueued || j.Spec.Priority != 50 || j.Spec.MaxAttempts != 3 || j.Spec.Name != "hello" {
		t.Fatalf("job %+v", j)
	}
	if !j.SubmittedAt.Equal(t0) {
		t.Errorf("submitted_at %s, want the leader's clock %s", j.SubmittedAt, t0)
	}
}

func TestSubmitBatch(t *testing.T) {
	a := newTestAPI(t)
	var b strings.Builder
	b.WriteString(`{"jobs":[`)
	const n = 1000
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"job-%d","command":["sleep","1"],"resources":{"cpu":"250m","memory":"64MiB"},"labels":{"batch":"b1"},"idempotency_key":"k-%d"}`, i, i)
	}
	b.WriteString(`]}`)
	code, body := a.do("POST", "/v1/jobs", b.String())
	if code != http.StatusCreated {
		t.Fatalf("status %d: %.300s", code, body)
	}
	var r BatchSubmitResponse
	mustJSON(t, body, &r)
	if len(r.Jobs) != n {
		t.Fatalf("%d results, want %d", len(r.Jobs), n)
	}
	seen := map[string]bool{}
	for _, j := range r.Jobs {
		if j.Duplicate || seen[j.ID] {
			t.Fatalf("result %+v (dup within batch?)", j)
		}
		seen[j.ID] = true
	}
	if got := a.job(r.Jobs[7].ID); got.Spec.Name != "job-7" || got.Spec.Resources.CPU != 250 || got.Spec.Resources.MemoryMB != 64 {
		t.Fatalf("job 7 = %+v", got.Spec)
	}
	// The same batch again: every job is a duplicate, 200.
	code, body = a.do("POST", "/v1/jobs", b.String())
	mustJSON(t, body, &r)
	if code != http.StatusOK || !r.Jobs[0].Duplicate || !seen[r.Jobs[999].ID] {
		t.Fatalf("resubmit: %d %+v", code, r.Jobs[0])
	}
}

func TestSubmitIdempotencyHeader(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	spec := JobSpecInput{Command: Argv("true")}
	id1, dup1, err := submitJob(ctx, a.client, spec, "key-1")
	if err != nil || dup1 {
		t.Fatalf("first: %s %v %v", id1, dup1, err)
	}
	before := a.f.AppliedIndex()
	id2, dup2, err := submitJob(ctx, a.client, spec, "key-1")
	if err != nil || !dup2 || id2 != id1 {
		t.Fatalf("second: %s dup=%v err=%v, want %s dup", id2, dup2, err, id1)
	}
	code, _ := a.do("POST", "/v1/jobs", `{"command":"true"}`, HeaderIdempotencyKey, "key-1")
	if code != http.StatusOK {
		t.Fatalf("raw duplicate status %d, want 200", code)
	}
	id3, dup3, err := submitJob(ctx, a.client, spec, "key-2")
	if err != nil || dup3 || id3 == id1 {
		t.Fatalf("other key: %s %v %v", id3, dup3, err)
	}
	if a.f.AppliedIndex() <= before {
		t.Fatal("no entry applied for the duplicate: dedup must happen inside the raft apply")
	}
	code, body := a.do("POST", "/v1/jobs", `{"jobs":[{"command":"true"}]}`, HeaderIdempotencyKey, "k")
	if code != http.StatusBadRequest || !strings.Contains(body, "Idempotency-Key") {
		t.Fatalf("header on a batch: %d %s", code, body)
	}
}

func TestBodyLimit(t *testing.T) {
	a := newTestAPI(t, func(c *Config) { c.MaxBodyBytes = 4096 })
	before := a.f.AppliedIndex()
	big := `{"command":"true","name":"x","env":{"A":"` + strings.Repeat("a", 5000) + `"}}`
	code, body := a.do("POST", "/v1/jobs", big)
	if code != http.StatusRequestEntityTooLarge || errorOf(t, body).Code != CodeTooLarge {
		t.Fatalf("status %d body %s, want 413", code, body)
	}
	if !strings.Contains(body, "4096") {
		t.Errorf("message should name the limit: %s", body)
	}
	if a.f.AppliedIndex() != before {
		t.Fatal("state changed")
	}
}

func TestAllowUnplaceable(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "", 1000, 1024)
	a.submit(`{"command":"true","resources":{"cpu":"4"},"allow_unplaceable":true}`)
	a.submit(`{"command":"true","resources":{"cpu":"1","memory":"1GiB"}}`)
}

func TestClientAPIError(t *testing.T) {
	a := newTestAPI(t)
	_, err := a.client.GetJob(context.Background(), "nope")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != CodeNotFound {
		t.Fatalf("err %#v, want a 404 APIError", err)
	}
	if strings.Contains(ae.Error(), "\n") || !strings.Contains(ae.Error(), "nope") {
		t.Errorf("message %q should be one line naming the job", ae.Error())
	}
}
