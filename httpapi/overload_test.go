package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// Over MaxQueuedJobs queued jobs, submits get 429 with Retry-After and
// change nothing; every job that got 201 is in the state.
func TestSubmitRefusedOverQueuedBound(t *testing.T) {
	a := newTestAPI(t, func(c *Config) { c.MaxQueuedJobs = 3 })
	accepted := 0
	deadline := time.Now().Add(10 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no 429 after %d accepted submits over a bound of 3", accepted)
		}
		req, _ := http.NewRequest("POST", a.srv.URL+"/v1/jobs", strings.NewReader(`{"command":"true"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			accepted++
			continue
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("status %d Retry-After %q, want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		break
	}
	if accepted < 3 {
		t.Fatalf("refused after %d accepted, want at least 3", accepted)
	}
	code, body := a.do("POST", "/v1/jobs", `{"command":"true"}`)
	if code != http.StatusTooManyRequests || errorOf(t, body).Code != CodeOverloaded || !strings.Contains(body, "queued") {
		t.Fatalf("%d %s", code, body)
	}
	var n int
	_ = a.f.View(func(tx *fsm.Tx) error { n = tx.CountJobsInState(fsm.JobQueued); return nil })
	if n != accepted {
		t.Fatalf("%d queued jobs, %d accepted: a refused submit changed the state, or an accepted one was lost", n, accepted)
	}
}

// Over MaxPendingJobs jobs accepted and not yet committed, submits get
// 429; the Go client waits Retry-After and sends again, and gets through
// once the pending ones committed.
func TestSubmitRefusedOverPendingBound(t *testing.T) {
	a := newTestAPI(t, func(c *Config) { c.MaxBatchJobs, c.MaxPendingJobs = 2, 2 })
	gate := make(chan struct{})
	a.cluster.mu.Lock()
	a.cluster.applyGate = gate
	a.cluster.mu.Unlock()
	first := make(chan reply, 1)
	go func() { first <- post(a.srv.URL+"/v1/jobs", `{"jobs":[{"command":"true"},{"command":"true"}]}`) }()
	waitFor(t, "the batch to reach Apply", func() bool {
		a.cluster.mu.Lock()
		defer a.cluster.mu.Unlock()
		return a.cluster.gated == 1
	})
	code, body := a.do("POST", "/v1/jobs", `{"command":"true"}`)
	if code != http.StatusTooManyRequests || errorOf(t, body).Code != CodeOverloaded {
		t.Fatalf("%d %s, want 429 while 2 jobs are pending", code, body)
	}
	// The client retries on its own after Retry-After (1 s).
	var done atomic.Bool
	got := make(chan error, 1)
	go func() {
		_, _, err := submitJob(context.Background(), a.client, JobSpecInput{Command: []byte(`"true"`)}, "")
		done.Store(true)
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // not synchronisation: only lets the client meet the 429 first
	if done.Load() {
		t.Fatal("the client's submit returned while the node was over its bound")
	}
	a.cluster.mu.Lock()
	a.cluster.applyGate = nil
	a.cluster.mu.Unlock()
	close(gate)
	if r := <-first; r.code != http.StatusCreated {
		t.Fatalf("first batch: %d %v", r.code, r.err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("client submit after Retry-After: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not get through after the pending jobs committed")
	}
	// A client whose deadline is shorter than Retry-After gets the 429.
	a.cluster.mu.Lock()
	a.cluster.applyGate = make(chan struct{})
	a.cluster.mu.Unlock()
	go post(a.srv.URL+"/v1/jobs", `{"jobs":[{"command":"true"},{"command":"true"}]}`)
	waitFor(t, "the second batch to reach Apply", func() bool {
		a.cluster.mu.Lock()
		defer a.cluster.mu.Unlock()
		return a.cluster.gated == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, _, err := submitJob(ctx, a.client, JobSpecInput{Command: []byte(`"true"`)}, "")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.RetryAfter != time.Second {
		t.Fatalf("short-deadline submit: %v, want the 429 with RetryAfter 1s", err)
	}
	a.cluster.mu.Lock()
	close(a.cluster.applyGate)
	a.cluster.applyGate = nil
	a.cluster.mu.Unlock()
}

// A batch over MaxBatchJobs is 413 and names the limit.
func TestSubmitBatchTooLarge(t *testing.T) {
	a := newTestAPI(t, func(c *Config) { c.MaxBatchJobs = 3 })
	before := a.f.AppliedIndex()
	code, body := a.do("POST", "/v1/jobs", `{"jobs":[{"command":"a"},{"command":"a"},{"command":"a"},{"command":"a"}]}`)
	if code != http.StatusRequestEntityTooLarge || errorOf(t, body).Code != CodeBatchTooLarge || !strings.Contains(body, "at most 3 jobs") {
		t.Fatalf("%d %s, want 413 batch_too_large", code, body)
	}
	if a.f.AppliedIndex() != before {
		t.Fatal("a refused batch changed the state")
	}
}
