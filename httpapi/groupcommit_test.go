package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// reply is one raw HTTP answer.
type reply struct {
	code int
	body string
	err  error
}

func post(url, body string, hdr ...string) reply {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, body: string(b), err: err}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommit: submits that arrive while an entry is in raft share the
// next entry, and each keeps its own outcome: its own job, its own
// idempotency dedup (also against another member of the same entry), its
// own refusal, and a batch stays all-or-nothing.
func TestGroupCommit(t *testing.T) {
	a := newTestAPI(t, func(c *Config) { c.SubmitGroupInflight = 1 })
	a.addNode("n1", "127.0.0.1:1", 2000, 4096)
	url := a.srv.URL + "/v1/jobs"
	srv := a.srv.Config.Handler.(*server)

	gate := make(chan struct{})
	a.cluster.mu.Lock()
	a.cluster.applyGate = gate
	before := len(a.cluster.commands)
	a.cluster.mu.Unlock()

	// The first submit takes the only slot and waits in Apply.
	first := make(chan reply, 1)
	go func() { first <- post(url, `{"command":"true"}`) }()
	waitFor(t, "the first submit to reach Apply", func() bool {
		a.cluster.mu.Lock()
		defer a.cluster.mu.Unlock()
		return a.cluster.gated == 1
	})

	// These queue behind it and go together.
	reqs := []struct {
		body string
		hdr  []string
	}{
		{body: `{"command":"true","name":"plain-1"}`},
		{body: `{"command":"true","name":"plain-2"}`},
		{body: `{"command":"true","name":"keyed"}`, hdr: []string{HeaderIdempotencyKey, "same-key"}},
		{body: `{"command":"true","name":"keyed-again"}`, hdr: []string{HeaderIdempotencyKey, "same-key"}},
		{body: `{"command":"true","resources":{"cpu":64000}}`},                                   // more than any node
		{body: `{"jobs":[{"command":"true"},{"command":"true","resources":{"memory":"1TiB"}}]}`}, // a batch with a misfit
		{body: `{"jobs":[{"command":"true"},{"command":"true"}]}`},                               // a batch that fits
	}
	out := make([]reply, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = post(url, r.body, r.hdr...) }()
	}
	waitFor(t, "the submits to queue", func() bool { return srv.submits.queued() == len(reqs) })
	close(gate)
	wg.Wait()
	if r := <-first; r.err != nil || r.code != http.StatusCreated {
		t.Fatalf("first submit: %+v", r)
	}

	a.cluster.mu.Lock()
	cmds := a.cluster.commands[before:]
	a.cluster.mu.Unlock()
	if len(cmds) != 2 || cmds[0] != fsm.CmdSubmitJobs || cmds[1] != fsm.CmdSubmitGroup {
		t.Fatalf("entries %v, want one submit_jobs then one submit_group for %d submits", cmds, 1+len(reqs))
	}

	ids := map[string]bool{}
	single := func(i int, wantCode int) SubmitResponse {
		t.Helper()
		if out[i].err != nil || out[i].code != wantCode {
			t.Fatalf("submit %d: %+v, want %d", i, out[i], wantCode)
		}
		var s SubmitResponse
		mustJSON(t, out[i].body, &s)
		return s
	}
	for _, i := range []int{0, 1} {
		s := single(i, http.StatusCreated)
		if ids[s.ID] || s.Duplicate {
			t.Fatalf("submit %d: %+v (IDs so far %v)", i, s, ids)
		}
		ids[s.ID] = true
		if j := a.job(s.ID); j.Spec.Name != fmt.Sprintf("plain-%d", i+1) {
			t.Fatalf("submit %d got job %+v", i, j)
		}
	}
	k1, k2 := single(2, http.StatusCreated), single(3, http.StatusOK)
	if k1.Duplicate || !k2.Duplicate || k1.ID != k2.ID || ids[k1.ID] {
		t.Fatalf("same idempotency key in one entry: %+v and %+v, want one job for both", k1, k2)
	}
	if j := a.job(k1.ID); j.Spec.Name != "keyed" {
		t.Fatalf("keyed job: %+v", j)
	}
	for i, field := range map[int]string{4: "resources.cpu", 5: "jobs[1].resources.memory"} {
		if out[i].code != http.StatusBadRequest || !strings.Contains(errorOf(t, out[i].body).Error, field) {
			t.Fatalf("submit %d: %+v, want 400 about %s", i, out[i], field)
		}
	}
	var batch BatchSubmitResponse
	if out[6].code != http.StatusCreated || json.Unmarshal([]byte(out[6].body), &batch) != nil || len(batch.Jobs) != 2 {
		t.Fatalf("batch: %+v", out[6])
	}
	// Nothing of the refused batch was written: 2 plain + 1 keyed + 2
	// batch jobs, plus the first submit.
	jobs, _, err := a.f.ListJobs(fsm.JobQuery{Limit: 100})
	if err != nil || len(jobs) != 6 {
		t.Fatalf("%d jobs stored (%v), want 6", len(jobs), err)
	}
}

// TestGroupCommitIdleSubmitsGoAlone: with nothing waiting, a submit is one
// plain submit_jobs entry at once (no waiting for company).
func TestGroupCommitIdleSubmitsGoAlone(t *testing.T) {
	a := newTestAPI(t)
	for range 3 {
		a.submit(`{"command":"true"}`)
	}
	a.cluster.mu.Lock()
	defer a.cluster.mu.Unlock()
	if len(a.cluster.commands) != 3 {
		t.Fatalf("entries %v, want 3 submit_jobs", a.cluster.commands)
	}
	for _, c := range a.cluster.commands {
		if c != fsm.CmdSubmitJobs {
			t.Fatalf("entries %v, want only submit_jobs", a.cluster.commands)
		}
	}
}
