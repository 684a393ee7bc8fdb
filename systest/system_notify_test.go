package systest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/sched"
)

// TestSystemHTTPJobs: HTTP jobs on a real agent against a test server: one
// succeeds (the server sees the attempt's fencing token, the job's log
// holds the response), one is answered 500 twice and succeeds on its
// third attempt, one is answered 500 until its attempts run out.
func TestSystemHTTPJobs(t *testing.T) {
	var mu sync.Mutex
	tokens := map[string]string{} // job ID → fencing token header
	calls := map[string]int{}     // path → requests
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.URL.Path]++
		n := calls[r.URL.Path]
		tokens[r.Header.Get("X-Foreman-Job-ID")] = r.Header.Get("X-Foreman-Fencing-Token")
		mu.Unlock()
		switch {
		case r.URL.Path == "/ok":
			fmt.Fprint(w, "hello from the test server")
		case r.URL.Path == "/flaky" && n > 2:
			w.WriteHeader(http.StatusCreated)
		default:
			http.Error(w, "broken", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	c := newSysCluster(t, 1)
	a := c.agents[0]
	backoff := map[string]any{"initial": "100ms", "max": "200ms"}

	ok := submitJob(t, a, map[string]any{"http": map[string]any{"url": srv.URL + "/ok"}})
	flaky := submitJob(t, a, map[string]any{"http": map[string]any{"url": srv.URL + "/flaky", "method": "POST", "expect_status": []int{200, 201}},
		"max_attempts": 3, "backoff": backoff})
	broken := submitJob(t, a, map[string]any{"http": map[string]any{"url": srv.URL + "/broken"}, "max_attempts": 2, "backoff": backoff})

	j := waitJobState(t, a, ok, "succeeded")
	mu.Lock()
	tok := tokens[ok]
	mu.Unlock()
	if want := strconv.FormatUint(j.attempt(1).FencingToken, 10); tok != want {
		t.Errorf("the server saw fencing token %q, want the attempt's %s", tok, want)
	}
	resp, err := http.Get(a.url("/v1/jobs/" + ok + "/logs"))
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(logs), "HTTP/1.1 200 OK\nhello from the test server") {
		t.Errorf("job log %q", logs)
	}
	if j := waitJobState(t, a, flaky, "succeeded"); len(j.Attempts) != 3 || j.attempt(1).State != "failed" ||
		!strings.Contains(j.attempt(1).Reason, "HTTP 500") {
		t.Errorf("flaky job: %s", j)
	}
	// The CLI: `foreman run --url` submits, prints the response and exits 0;
	// `job status` shows the request.
	r := runForeman(t, c.bin, a.url(""), "run", "--url", srv.URL+"/ok", "--expect", "200")
	if r.code != 0 || !strings.Contains(r.stdout, "hello from the test server") {
		t.Errorf("foreman run --url: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := runForeman(t, c.bin, a.url(""), "job", "status", flaky); r.code != 0 || !strings.Contains(r.stdout, "POST "+srv.URL+"/flaky (expect 200,201)") {
		t.Errorf("foreman job status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	eventually(t, systemTimeout, "the broken job to fail", func() error {
		j, err := getJob(a, broken)
		if err != nil {
			return err
		}
		if j.Job.State != "failed" || j.Job.Attempts != 2 || !strings.Contains(j.Job.Reason, "HTTP 500 Internal Server Error (expected 2xx)") {
			return fmt.Errorf("%s", j)
		}
		return nil
	})
}

// webhookReceiver records every verified delivery by job; it answers
// slowly so deliveries are still pending when the leader dies, and 503 to
// every third request so retries happen too.
type webhookReceiver struct {
	mu       sync.Mutex
	finished map[string]int // job ID → deliveries of its finished event
	bad      []string
	n        int
}

func (rv *webhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rv.mu.Lock()
	rv.n++
	n := rv.n
	rv.mu.Unlock()
	time.Sleep(300 * time.Millisecond) // a slow receiver
	if n%3 == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var ev fsm.WebhookEvent
	err := json.Unmarshal(body, &ev)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	switch {
	case err != nil:
		rv.bad = append(rv.bad, "body: "+err.Error())
	case !sched.VerifySignature("hook-secret", body, r.Header.Get("X-Foreman-Signature")):
		rv.bad = append(rv.bad, "bad signature on "+ev.ID)
	case r.Header.Get("X-Foreman-Event-ID") != ev.ID || ev.State != fsm.JobSucceeded:
		rv.bad = append(rv.bad, fmt.Sprintf("event %+v with ID header %q", ev, r.Header.Get("X-Foreman-Event-ID")))
	default:
		rv.finished[ev.JobID]++
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rv *webhookReceiver) missing(ids []string) []string {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	var out []string
	for _, id := range ids {
		if rv.finished[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// TestSystemWebhooksThroughLeaderKill: every job's finished event reaches
// the receiver at least once with a valid signature, though the leader is
// killed while deliveries are pending; the job's deliveries are recorded
// (delivered) on the surviving nodes.
func TestSystemWebhooksThroughLeaderKill(t *testing.T) {
	rv := &webhookReceiver{finished: map[string]int{}}
	srv := httptest.NewServer(rv)
	defer srv.Close()
	c := newSysCluster(t, 3)
	leader := c.leader()
	spec := func(i int) map[string]any {
		return map[string]any{"command": []string{"true"}, "name": fmt.Sprintf("hook-%d", i),
			"notify": []map[string]any{{"url": srv.URL + "/hook", "events": []string{"finished"}, "secret": "hook-secret"}}}
	}
	var ids []string
	for i := 0; i < 30; i++ {
		ids = append(ids, submitJob(t, leader, spec(i)))
	}
	eventually(t, systemTimeout, "a first delivery", func() error {
		if m := rv.missing(ids); len(m) == len(ids) {
			return fmt.Errorf("none delivered yet")
		}
		return nil
	})
	pending := len(rv.missing(ids))
	leader.kill9()
	t.Logf("killed the leader %s with %d of %d jobs' events not yet delivered", leader.name, pending, len(ids))
	survivor := c.others()[0]
	for i := 30; i < 40; i++ {
		ids = append(ids, submitJob(t, survivor, spec(i)))
	}
	eventually(t, 2*systemTimeout, "every finished event delivered", func() error {
		if m := rv.missing(ids); len(m) > 0 {
			return fmt.Errorf("%d jobs' events not delivered, e.g. %s", len(m), m[0])
		}
		return nil
	})
	rv.mu.Lock()
	if len(rv.bad) > 0 {
		t.Errorf("bad deliveries: %v", rv.bad)
	}
	rv.mu.Unlock()
	// The outcome is in the replicated state, secrets are not.
	for _, a := range c.others() {
		eventually(t, systemTimeout, "delivery records on "+a.name, func() error {
			for _, id := range ids {
				var d struct {
					Job        json.RawMessage `json:"job"`
					Deliveries []fsm.Delivery  `json:"deliveries"`
				}
				if err := getJSON(a.url("/v1/jobs/"+id), &d); err != nil {
					return err
				}
				if strings.Contains(string(d.Job), "hook-secret") {
					t.Fatalf("GET /v1/jobs/%s on %s shows the webhook secret", id, a.name)
				}
				if len(d.Deliveries) != 1 || d.Deliveries[0].State != fsm.DeliveryDelivered {
					return fmt.Errorf("job %s deliveries %+v", id, d.Deliveries)
				}
			}
			return nil
		})
	}
	r := runForeman(t, c.bin, survivor.url(""), "job", "status", ids[0])
	if r.code != 0 || !strings.Contains(r.stdout, "Webhooks:") || !strings.Contains(r.stdout, "job.succeeded") || !strings.Contains(r.stdout, "delivered") ||
		!strings.Contains(r.stdout, "webhook.delivered") {
		t.Errorf("foreman job status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
