package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// sentSpec decodes the last submitted body as the API would and normalises it.
func sentSpec(t *testing.T, rec *recorder) fsm.JobSpec {
	t.Helper()
	b, _ := json.Marshal(rec.bodies[len(rec.bodies)-1])
	var in httpapi.JobSpecInput
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	spec, err := in.Normalize()
	if err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	return spec
}

func TestSubmitHTTPJobFlags(t *testing.T) {
	rec := &recorder{status: http.StatusCreated, reply: `{"id":"01JOB","duplicate":false}`}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	out, err := runCLI(t, "submit", "--addr", srv.URL, "--url", "https://example.org/hook", "--method", "post",
		"--header", "Authorization: Bearer x:y", "--header", "X-A: 1", "--body", `{"a":1}`, "--expect", "200, 201",
		"--notify", "http://receiver.example/h", "--notify-on", "finished,failed", "--notify-secret", "s3", "--max-attempts", "2")
	if err != nil || strings.TrimSpace(out) != "01JOB" {
		t.Fatalf("%q %v", out, err)
	}
	spec := sentSpec(t, rec)
	h := spec.HTTP
	if spec.Driver != "http" || h == nil || h.Method != "POST" || h.URL != "https://example.org/hook" || h.Body != `{"a":1}` ||
		h.Headers["Authorization"] != "Bearer x:y" || h.Headers["X-A"] != "1" || mustMarshal(h.ExpectStatus) != "[200,201]" || spec.MaxAttempts != 2 {
		t.Errorf("spec %+v, http %+v", spec, h)
	}
	if len(spec.Notify) != 1 || spec.Notify[0].URL != "http://receiver.example/h" || mustMarshal(spec.Notify[0].Events) != `["finished","failed"]` ||
		spec.Notify[0].Secret != "s3" {
		t.Errorf("notify %+v", spec.Notify)
	}
	// A command job with a webhook (events default to finished).
	if _, err := runCLI(t, "submit", "--addr", srv.URL, "--notify", "http://r/", "--", "true"); err != nil {
		t.Fatal(err)
	}
	if spec := sentSpec(t, rec); len(spec.Notify) != 1 || spec.Notify[0].Events[0] != "finished" || spec.HTTP != nil {
		t.Errorf("notify %+v http %+v", spec.Notify, spec.HTTP)
	}

	sent := len(rec.bodies)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", "http://x/", "--expect", "2xx"}, "--expect"},
		{[]string{"--url", "http://x/", "--header", "NoColon"}, "--header"},
		{[]string{"--url", "http://x/", "--", "echo", "hi"}, "takes no command"},
		{[]string{"--notify-on", "failed", "--", "true"}, "--notify"},
	} {
		_, err := runCLI(t, append([]string{"submit", "--addr", srv.URL}, tc.args...)...)
		assertOneLineExit(t, err, tc.want)
	}
	if len(rec.bodies) != sent {
		t.Errorf("bad flags still sent %d requests", len(rec.bodies)-sent)
	}
}

// TestSubmitHTTPSpecFile: the example in testdata/ is a valid HTTP job
// with webhooks, submitted with -f.
func TestSubmitHTTPSpecFile(t *testing.T) {
	rec := &recorder{status: http.StatusCreated, reply: `{"id":"01JOB","duplicate":false}`}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	if _, err := runCLI(t, "submit", "--addr", srv.URL, "-f", "../testdata/http-job.yaml"); err != nil {
		t.Fatal(err)
	}
	spec := sentSpec(t, rec)
	if spec.Driver != "http" || spec.HTTP.Method != "POST" || spec.HTTP.URL != "https://api.example.com/cache/warm" ||
		spec.Timeout.D() != 30*time.Second || len(spec.Notify) != 2 || spec.Notify[1].MaxAttempts != 10 {
		t.Errorf("spec %+v http %+v notify %+v", spec, spec.HTTP, spec.Notify)
	}
}

// TestJobStatusShowsRequestAndWebhooks: job status prints an HTTP job's
// request and the job's deliveries.
func TestJobStatusShowsRequestAndWebhooks(t *testing.T) {
	now := time.Now()
	d := httpapi.JobDetail{
		Job: fsm.Job{ID: "01J", State: fsm.JobFailed, Spec: fsm.JobSpec{Driver: "http", MaxAttempts: 1,
			HTTP: &fsm.HTTPRequest{Method: "POST", URL: "https://example.org/x", ExpectStatus: []int{200, 201}}}},
		Attempts: []fsm.Attempt{{JobID: "01J", Num: 1, Node: "n1", State: fsm.AttemptFailed, Reason: "HTTP 500 Internal Server Error (expected 200,201)"}},
		Deliveries: []fsm.Delivery{
			{URL: "http://r/h", State: fsm.DeliveryPending, Attempts: 2, MaxAttempts: 50, LastStatus: 503, LastError: "HTTP 503 Service Unavailable",
				NextAt: now.Add(4 * time.Second), Event: fsm.WebhookEvent{Type: "job.failed"}},
			{URL: "http://r/ok", State: fsm.DeliveryDelivered, Attempts: 1, MaxAttempts: 50, LastStatus: 204, Event: fsm.WebhookEvent{Type: "job.failed"}},
		},
	}
	b, _ := json.Marshal(d)
	rec := &recorder{status: http.StatusOK, reply: string(b)}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	out, err := runCLI(t, "job", "status", "--addr", srv.URL, "01J")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Request:", "POST https://example.org/x (expect 200,201)", "Webhooks:", "EVENT", "job.failed",
		"http://r/h", "pending", "2/50", "HTTP 503 Service Unavailable", "  in ", "http://r/ok", "delivered", "204"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
