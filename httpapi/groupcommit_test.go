package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
	// The two requests with one key queued in either order: the first
	// creates the job, the other gets it as a duplicate.
	c, d := 2, 3
	if out[2].code == http.StatusOK {
		c, d = 3, 2
	}
	k1, k2 := single(c, http.StatusCreated), single(d, http.StatusOK)
	if k1.Duplicate || !k2.Duplicate || k1.ID != k2.ID || ids[k1.ID] {
		t.Fatalf("same idempotency key in one entry: %+v and %+v, want one job for both", k1, k2)
	}
	if j := a.job(k1.ID); j.Spec.Name != map[int]string{2: "keyed", 3: "keyed-again"}[c] {
		t.Fatalf("keyed job: %+v, want the one of submit %d", j, c)
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

// TestFollowerGroupsSubmits: submits that reach a follower go to the leader
// in groups (one request, one raft entry for all that queued), each with
// its own answer, including the leader's refusal of one of them.
func TestFollowerGroupsSubmits(t *testing.T) {
	inflight1 := func(c *Config) { c.SubmitGroupInflight = 1 }
	leader := newTestAPI(t, inflight1)
	leader.addNode("n1", "127.0.0.1:1", 2000, 4096)
	follower := newTestAPIOn(t, openFSM(t), "n2", false, inflight1)
	follower.cluster.leaderName = leader.cluster.name
	follower.cluster.leaderAddr = strings.TrimPrefix(leader.srv.URL, "http://")
	url := follower.srv.URL + "/v1/jobs"

	gate := make(chan struct{})
	leader.cluster.mu.Lock()
	leader.cluster.applyGate = gate
	before := len(leader.cluster.commands)
	leader.cluster.mu.Unlock()
	first := make(chan reply, 1)
	go func() { first <- post(url, `{"command":"true"}`) }()
	waitFor(t, "the first forwarded submit to reach Apply", func() bool {
		leader.cluster.mu.Lock()
		defer leader.cluster.mu.Unlock()
		return leader.cluster.gated == 1
	})

	bodies := []string{
		`{"command":"true","name":"a"}`,
		`{"command":"true","name":"b"}`,
		`{"command":"true","resources":{"cpu":64000}}`, // refused by the leader
		`{"command":"true","name":"c"}`,
	}
	out := make([]reply, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = post(url, b) }()
	}
	fsrv := follower.srv.Config.Handler.(*server)
	waitFor(t, "the submits to queue on the follower", func() bool { return fsrv.submits.queued() == len(bodies) })
	close(gate)
	wg.Wait()
	if r := <-first; r.err != nil || r.code != http.StatusCreated {
		t.Fatalf("first submit: %+v", r)
	}
	leader.cluster.mu.Lock()
	cmds := leader.cluster.commands[before:]
	leader.cluster.mu.Unlock()
	if len(cmds) != 2 || cmds[1] != fsm.CmdSubmitGroup {
		t.Fatalf("leader entries %v, want submit_jobs then one submit_group", cmds)
	}
	if follower.f.AppliedIndex() != 0 {
		t.Fatal("the follower applied a write itself")
	}
	for i, name := range map[int]string{0: "a", 1: "b", 3: "c"} {
		if out[i].code != http.StatusCreated {
			t.Fatalf("submit %d: %+v", i, out[i])
		}
		var s SubmitResponse
		mustJSON(t, out[i].body, &s)
		if j := leader.job(s.ID); j.Spec.Name != name {
			t.Fatalf("submit %d got job %+v", i, j)
		}
	}
	if out[2].code != http.StatusBadRequest || errorOf(t, out[2].body).Code != CodeInvalid || !strings.Contains(out[2].body, "resources.cpu") {
		t.Fatalf("refused member: %+v", out[2])
	}
}

// TestWriteSubmitResponse: the hand-written submit reply is byte for byte
// what writeJSON writes.
func TestWriteSubmitResponse(t *testing.T) {
	for _, out := range [][]SubmitResponse{
		{{ID: "01ABC"}},
		{{ID: "01ABC", Duplicate: true}},
		{{ID: "01ABC"}, {ID: "01DEF", Duplicate: true}, {ID: "x_y-z"}},
		{{ID: `we"ird`}},
		{{ID: "ok"}, {ID: "<script>"}},
	} {
		for _, batch := range []bool{false, true} {
			if !batch && len(out) > 1 {
				continue
			}
			got, want := httptest.NewRecorder(), httptest.NewRecorder()
			writeSubmitResponse(got, http.StatusCreated, out, batch)
			if batch {
				writeJSON(want, http.StatusCreated, BatchSubmitResponse{Jobs: out})
			} else {
				writeJSON(want, http.StatusCreated, out[0])
			}
			if got.Body.String() != want.Body.String() || got.Code != want.Code ||
				got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Errorf("%+v batch=%v:\ngot  %d %q\nwant %d %q", out, batch, got.Code, got.Body, want.Code, want.Body)
			}
		}
	}
}

// TestGroupCommitBigBatchGoesAlone: a batch of soloJobs jobs does not wait
// for the entry in flight; it goes to raft at once, next to it.
func TestGroupCommitBigBatchGoesAlone(t *testing.T) {
	a := newTestAPI(t, func(c *Config) { c.SubmitGroupInflight = 1 })
	url := a.srv.URL + "/v1/jobs"
	srv := a.srv.Config.Handler.(*server)
	gate := make(chan struct{})
	a.cluster.mu.Lock()
	a.cluster.applyGate = gate
	a.cluster.mu.Unlock()
	gated := func(n int) func() bool {
		return func() bool {
			a.cluster.mu.Lock()
			defer a.cluster.mu.Unlock()
			return a.cluster.gated == n
		}
	}
	done := make(chan reply, 2)
	go func() { done <- post(url, `{"command":"true"}`) }()
	waitFor(t, "the first submit to reach Apply", gated(1))
	jobs := strings.Repeat(`{"command":"true"},`, soloJobs)
	go func() { done <- post(url, `{"jobs":[`+strings.TrimSuffix(jobs, ",")+`]}`) }()
	waitFor(t, "the batch to reach Apply beside it", gated(2))
	if q := srv.submits.queued(); q != 0 {
		t.Fatalf("%d submits queued, want the batch in Apply", q)
	}
	close(gate)
	for range 2 {
		if r := <-done; r.err != nil || r.code != http.StatusCreated {
			t.Fatalf("submit: %+v", r)
		}
	}
}
