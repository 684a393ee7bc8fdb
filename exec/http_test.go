package exec

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// seenRequest is what the test server recorded of one request.
type seenRequest struct {
	method, body             string
	token, job, attempt, hdr string
}

// TestHTTPJobs runs HTTP jobs through a worker whose supervisor is
// recycled between them (so each request also proves it leaves nothing
// behind: connections, goroutines), against a real local server.
func TestHTTPJobs(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]seenRequest{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[r.Header.Get(HeaderJobID)] = seenRequest{method: r.Method, body: string(b), token: r.Header.Get(HeaderFencingToken),
			job: r.Header.Get(HeaderJobID), attempt: r.Header.Get(HeaderAttempt), hdr: r.Header.Get("X-Custom")}
		mu.Unlock()
		w.Write([]byte("hello"))
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.WriteHeader(code)
		w.Write([]byte("status body"))
	})
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("y", 32<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	state := newFakeState()
	h := startWorker(t, state, recycleConfig(t))
	req := func(method, path string, expect ...int) *fsm.HTTPRequest {
		return &fsm.HTTPRequest{Method: method, URL: srv.URL + path, ExpectStatus: expect}
	}
	tests := []struct {
		name    string
		spec    fsm.JobSpec
		state   fsm.AttemptState
		reason  string
		stdout  string // prefix
		stderr  string // substring
		timeout time.Duration
	}{
		{name: "ok", spec: fsm.JobSpec{HTTP: &fsm.HTTPRequest{Method: "POST", URL: srv.URL + "/ok", Body: `{"a":1}`,
			Headers: map[string]string{"X-Custom": "v", HeaderFencingToken: "spoofed"}}},
			state: fsm.AttemptSucceeded, stdout: "HTTP/1.1 200 OK\nhello"},
		{name: "500", spec: fsm.JobSpec{HTTP: req("GET", "/status/500")}, state: fsm.AttemptFailed,
			reason: "HTTP 500 Internal Server Error (expected 2xx)", stdout: "HTTP/1.1 500 Internal Server Error\nstatus body"},
		{name: "expect-201-got-200", spec: fsm.JobSpec{HTTP: req("GET", "/status/200", 201, 202)}, state: fsm.AttemptFailed,
			reason: "HTTP 200 OK (expected 201,202)"},
		{name: "expect-404", spec: fsm.JobSpec{HTTP: req("DELETE", "/status/404", 404)}, state: fsm.AttemptSucceeded},
		{name: "endless-body", spec: fsm.JobSpec{HTTP: req("GET", "/endless")}, state: fsm.AttemptSucceeded,
			stderr: "response body cut off after 65536 bytes"},
		{name: "timeout", spec: fsm.JobSpec{HTTP: req("GET", "/hang"), Timeout: fsm.Duration(300 * time.Millisecond)},
			state: fsm.AttemptKilled, reason: fsm.ReasonTimeout},
		{name: "refused", spec: fsm.JobSpec{HTTP: &fsm.HTTPRequest{Method: "GET", URL: "http://127.0.0.1:1/"}},
			state: fsm.AttemptFailed, reason: "connection refused"},
		{name: "no-request", spec: fsm.JobSpec{}, state: fsm.AttemptFailed, reason: ErrNoRequest.Error()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := "http-" + tc.name
			tc.spec.Driver = HTTPDriverName
			state.assign(job, tc.spec)
			r := h.waitFinal(t, job, waitLong)
			if r.State != tc.state || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("%s %q, want %s %q", r.State, r.Reason, tc.state, tc.reason)
			}
			if tc.state == fsm.AttemptSucceeded && (r.ExitCode == nil || *r.ExitCode != 0) {
				t.Errorf("exit code %v, want 0", r.ExitCode)
			}
			out := h.stdout(t, job)
			if !strings.HasPrefix(out, tc.stdout) {
				t.Errorf("stdout %q, want prefix %q", last(out, 200), tc.stdout)
			}
			if tc.name == "endless-body" {
				if want := len("HTTP/1.1 200 OK\n") + HTTPBodyMax; len(out) != want {
					t.Errorf("stdout %d bytes, want %d (status line + HTTPBodyMax)", len(out), want)
				}
			}
			if errOut := readFile(t, filepath.Join(h.dir(job), StderrName)); !strings.Contains(errOut, tc.stderr) {
				t.Errorf("stderr %q, want %q", errOut, tc.stderr)
			}
		})
	}
	mu.Lock()
	got := seen["http-ok"]
	mu.Unlock()
	if got.method != "POST" || got.body != `{"a":1}` || got.hdr != "v" || got.attempt != "1" || got.token == "" || got.token == "spoofed" {
		t.Errorf("the server saw %+v", got)
	}
	if n := h.w.recycled.Load(); n < int64(len(tests))-2 {
		t.Errorf("supervisors recycled %d times over %d HTTP attempts: an HTTP attempt left something behind", n, len(tests))
	}
}

// TestHTTPJobFencedByLease: the request runs inside the supervisor, so a
// lost lease aborts it like any job (invariant 2).
func TestHTTPJobFencedByLease(t *testing.T) {
	hung := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.LeaseDuration, cfg.RenewInterval = time.Second, 300*time.Millisecond
	h := startWorker(t, state, cfg)
	state.assign("fence", fsm.JobSpec{Driver: HTTPDriverName, HTTP: &fsm.HTTPRequest{Method: "GET", URL: srv.URL}})
	select {
	case <-hung:
	case <-time.After(waitLong):
		t.Fatal("the request never reached the server")
	}
	state.contact.Store(false)
	var res *Result
	waitFor(t, waitShort, "result.json", func() bool {
		var err error
		res, err = ReadResult(h.dir("fence"))
		return err == nil
	})
	if res.State != fsm.AttemptKilled || res.Reason != fsm.ReasonFenced {
		t.Fatalf("result %s/%s, want killed/fenced", res.State, res.Reason)
	}
	state.contact.Store(true)
	h.waitFinal(t, "fence", waitShort)
}
