package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
)

// testTimeout bounds each test's calls on a slow, shared 2-core machine.
const testTimeout = 30 * time.Second

// fakeServer answers each request with the next of its handlers (the last
// one repeats) and records the requests.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	handlers []http.HandlerFunc
	requests []*http.Request
}

func newFakeServer(t *testing.T, handlers ...http.HandlerFunc) *fakeServer {
	f := &fakeServer{handlers: handlers}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		n := len(f.requests)
		f.requests = append(f.requests, r.Clone(context.Background()))
		h := f.handlers[min(n, len(f.handlers)-1)]
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) got() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.requests...)
}

func (f *fakeServer) client(t *testing.T) *api.Client {
	c, err := api.NewClient(api.Config{Address: f.URL, Token: "-", MaxRetryWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func errorReply(status int, code, msg string, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error": %q, "code": %q}`, msg, code)
	}
}

func jsonReply(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}
}

// brokenConnection reads the request and drops the connection without an
// answer: the outcome of a write is unknown.
func brokenConnection(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestSubmitRetries(t *testing.T) {
	ok := jsonReply(`{"id": "J1", "duplicate": true}`)
	tests := []struct {
		name     string
		handlers []http.HandlerFunc
		key      string // the caller's key ("": the client makes one)
		tries    int
	}{
		{"503 then ok", []http.HandlerFunc{errorReply(503, "no_leader", "no leader"), ok}, "", 2},
		{"502 and 504 then ok", []http.HandlerFunc{errorReply(502, "node_unreachable", "x"), errorReply(504, "timeout", "x"), ok}, "", 3},
		{"broken connection then ok", []http.HandlerFunc{brokenConnection, ok}, "", 2},
		{"caller's key", []http.HandlerFunc{errorReply(503, "no_leader", "no leader"), ok}, "mine", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, tc.handlers...)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			sub, err := f.client(t).SubmitJob(ctx, api.JobSpec{Command: []string{"true"}, IdempotencyKey: tc.key})
			if err != nil {
				t.Fatal(err)
			}
			if sub.ID != "J1" || !sub.Duplicate {
				t.Errorf("got %+v, want J1 duplicate", sub)
			}
			reqs := f.got()
			if len(reqs) != tc.tries {
				t.Fatalf("%d requests, want %d", len(reqs), tc.tries)
			}
			key := reqs[0].Header.Get("Idempotency-Key")
			if key == "" || tc.key != "" && key != tc.key {
				t.Fatalf("Idempotency-Key %q, want %q (or a made one)", key, tc.key)
			}
			for i, r := range reqs {
				if k := r.Header.Get("Idempotency-Key"); k != key {
					t.Errorf("try %d sent key %q, the first %q: a resend must carry the same key", i+1, k, key)
				}
				if id := r.Header.Get("X-Request-ID"); id != reqs[0].Header.Get("X-Request-ID") {
					t.Errorf("try %d request ID %q differs from the first's", i+1, id)
				}
			}
		})
	}
}

func TestSubmitJobsGivesEachJobAKey(t *testing.T) {
	var body string
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		jsonReply(`{"jobs": [{"id": "A", "duplicate": false}, {"id": "B", "duplicate": false}]}`)(w, r)
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	out, err := f.client(t).SubmitJobs(ctx, []api.JobSpec{{Command: []string{"a"}}, {Command: []string{"b"}, IdempotencyKey: "kb"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].ID != "A" || out[1].ID != "B" {
		t.Errorf("got %+v", out)
	}
	if n := strings.Count(body, `"idempotency_key":"go-`); n != 1 || !strings.Contains(body, `"idempotency_key":"kb"`) {
		t.Errorf("body %s: want a made key on the first job and kb on the second", body)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	f := newFakeServer(t, errorReply(429, "overloaded", "overloaded", "Retry-After", "1"), jsonReply(`{"id": "J1", "duplicate": false}`))
	c, err := api.NewClient(api.Config{Address: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	start := time.Now()
	if _, err := c.SubmitJob(ctx, api.JobSpec{Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("retried after %v, before the server's Retry-After of 1s", d)
	}
	if n := len(f.got()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// A write without an idempotency key is not sent again when its outcome
// is unknown, and a 429 with a Retry-After past the deadline is returned.
func TestNoRetry(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		call    func(context.Context, *api.Client) error
		status  int
		code    string
	}{
		{"cancel on 503", errorReply(503, "no_leader", "no leader"), func(ctx context.Context, c *api.Client) error {
			_, err := c.CancelJob(ctx, "J1", "")
			return err
		}, 503, api.CodeNoLeader},
		{"trigger on a broken connection", brokenConnection, func(ctx context.Context, c *api.Client) error {
			_, err := c.TriggerSchedule(ctx, "nightly")
			return err
		}, 0, ""},
		{"429 past the deadline", errorReply(429, "overloaded", "overloaded", "Retry-After", "30"), func(ctx context.Context, c *api.Client) error {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := c.GetJob(ctx, "J1")
			return err
		}, 429, api.CodeOverloaded},
		{"a streamed body", errorReply(503, "unavailable", "restoring"), func(ctx context.Context, c *api.Client) error {
			return c.Do(ctx, api.Request{Method: http.MethodPut, Path: "/v1/operator/snapshot", Body: strings.NewReader("backup"), Idempotent: true}, nil)
		}, 503, api.CodeUnavailable},
		{"not found", errorReply(404, "not_found", "job J1 not found"), func(ctx context.Context, c *api.Client) error {
			_, err := c.GetJob(ctx, "J1")
			return err
		}, 404, api.CodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, tc.handler)
			c, err := api.NewClient(api.Config{Address: f.URL})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			err = tc.call(ctx, c)
			if n := len(f.got()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			if tc.status == 0 {
				var ce *api.ConnectionError
				if !errors.As(err, &ce) || ce.NotSent {
					t.Errorf("error %v (%T): want a *ConnectionError that may have been sent", err, err)
				}
				return
			}
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != tc.status || ae.Code != tc.code {
				t.Fatalf("error %v (%T), want status %d code %s", err, err, tc.status, tc.code)
			}
			if !errors.Is(err, &api.Error{Code: tc.code}) {
				t.Errorf("errors.Is(err, code %s) is false", tc.code)
			}
		})
	}
}

func TestErrorCarriesField(t *testing.T) {
	f := newFakeServer(t, errorReply(400, "invalid", "priority: must be between 0 and 100 (got 200)"))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err := f.client(t).SubmitJob(ctx, api.JobSpec{Command: []string{"true"}, Priority: api.Int(200)})
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want *api.Error", err, err)
	}
	if ae.Status != 400 || ae.Field != "priority" || !errors.Is(err, api.ErrInvalid) || errors.Is(err, api.ErrNotFound) {
		t.Errorf("got %+v", ae)
	}
	if len(f.got()) != 1 {
		t.Errorf("an invalid submit was sent again")
	}
}

func TestFailFast(t *testing.T) {
	f := newFakeServer(t, errorReply(503, "no_leader", "no leader"), errorReply(429, "overloaded", "overloaded"), jsonReply(`{"id": "J1", "duplicate": false}`))
	c, err := api.NewClient(api.Config{Address: f.URL, FailFast: true, MaxRetryWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.SubmitJob(ctx, api.JobSpec{Command: []string{"true"}}); !errors.Is(err, api.ErrNoLeader) {
		t.Fatalf("error %v: want no_leader at once", err)
	}
	if _, err := c.SubmitJob(ctx, api.JobSpec{Command: []string{"true"}}); err != nil {
		t.Fatalf("error %v: a 429 is retried even with FailFast", err)
	}
	if n := len(f.got()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

func TestRefusedConnectionRetried(t *testing.T) {
	f := newFakeServer(t, jsonReply(`{}`))
	addr := f.URL
	f.Close() // nothing listens: every try is refused
	c, err := api.NewClient(api.Config{Address: addr, MaxRetries: 2, MaxRetryWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err = c.CancelJob(ctx, "J1", "")
	var ce *api.ConnectionError
	if !errors.As(err, &ce) || !ce.NotSent {
		t.Fatalf("error %v (%T): want a *ConnectionError with NotSent", err, err)
	}
}

// The stream reconnects after a break with the last delivered ID, so no
// event is lost or repeated.
func TestEventsResume(t *testing.T) {
	sse := func(events ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": hello\n\n")
			for _, e := range events {
				fmt.Fprintf(w, "id: %s\nevent: job\ndata: {\"id\": %q, \"topic\": \"job\", \"type\": \"job.queued\", \"job_id\": \"J\"}\n\n", e, e)
			}
		} // returning ends the stream: a break
	}
	f := newFakeServer(t, sse("5-0", "5-1"), errorReply(503, "not_ready", "catching up"), sse("6-0"))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var ids []string
	for e, err := range f.client(t).Events(ctx, api.EventQuery{Job: "J", After: "4-2"}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
		if len(ids) == 3 {
			break
		}
	}
	if strings.Join(ids, " ") != "5-0 5-1 6-0" {
		t.Errorf("events %v, want 5-0 5-1 6-0", ids)
	}
	reqs := f.got()
	var after []string
	for _, r := range reqs {
		after = append(after, r.Header.Get("Last-Event-ID"))
		if r.URL.Query().Get("job") != "J" {
			t.Errorf("request %s lost the job filter", r.URL)
		}
	}
	if strings.Join(after, " ") != "4-2 5-1 5-1" {
		t.Errorf("Last-Event-ID of each connection %q, want [4-2 5-1 5-1]", after)
	}
}

func TestEventsEndOnClientError(t *testing.T) {
	f := newFakeServer(t, errorReply(400, "invalid", "topic: unknown topic \"x\""))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var errs []error
	for _, err := range f.client(t).Events(ctx, api.EventQuery{Topics: []string{"x"}}) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], api.ErrInvalid) {
		t.Errorf("got %v, want one invalid error", errs)
	}
}

func TestNamespaceAndConsistent(t *testing.T) {
	f := newFakeServer(t, jsonReply(`{"job": {"id": "J1", "state": "queued"}, "attempts": []}`))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c := f.client(t).WithNamespace("team-a").Consistent()
	d, err := c.GetJob(ctx, "J 1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Job.State != api.JobQueued {
		t.Errorf("state %q", d.Job.State)
	}
	r := f.got()[0]
	if r.URL.EscapedPath() != "/v1/jobs/J%201" || r.URL.Query().Get("namespace") != "team-a" || r.URL.Query().Get("consistent") != "true" {
		t.Errorf("request %s", r.URL)
	}
	if r.Header.Get("Authorization") != "Bearer -" {
		t.Errorf("Authorization %q", r.Header.Get("Authorization"))
	}
}
