package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// logRecords captures a server's log as JSON lines.
type logRecords struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecords) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// capture sends a's server's log (debug and up) to the returned records;
// call it before the first request.
func captureLog(a *testAPI) *logRecords {
	l := &logRecords{}
	srv := a.srv.Config.Handler.(*server)
	h := slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})
	srv.log = slog.New(requestIDHandler{h}).With("component", "httpapi")
	return l
}

// records returns the captured records with message msg.
func (l *logRecords) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// idsIn returns the request IDs the records name (request_id and
// request_ids).
func idsIn(recs []map[string]any) []string {
	var out []string
	for _, r := range recs {
		if id, ok := r["request_id"].(string); ok {
			out = append(out, id)
		}
		if ids, ok := r["request_ids"].([]any); ok {
			for _, id := range ids {
				out = append(out, id.(string))
			}
		}
	}
	return out
}

// TestGroupedSubmitsKeepRequestIDs: submits grouped into one raft entry,
// through a follower, each get their own X-Request-ID back, and the log
// lines about the group name every member's request ID on the follower
// that grouped them and on the leader that committed them (a refused
// member's too).
func TestGroupedSubmitsKeepRequestIDs(t *testing.T) {
	inflight1 := func(c *Config) { c.SubmitGroupInflight = 1 }
	leader := newTestAPI(t, inflight1)
	leader.addNode("n1", "127.0.0.1:1", 2000, 4096)
	follower := newTestAPIOn(t, openFSM(t), "n2", false, inflight1)
	follower.cluster.leaderName = leader.cluster.name
	follower.cluster.leaderAddr = strings.TrimPrefix(leader.srv.URL, "http://")
	leaderLog, followerLog := captureLog(leader), captureLog(follower)
	url := follower.srv.URL + "/v1/jobs"

	gate := make(chan struct{})
	leader.cluster.mu.Lock()
	leader.cluster.applyGate = gate
	before := len(leader.cluster.commands)
	leader.cluster.mu.Unlock()
	type answer struct {
		code int
		id   string
		err  error
	}
	send := func(body, id string) answer {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set(HeaderRequestID, id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{err: err}
		}
		resp.Body.Close()
		return answer{code: resp.StatusCode, id: resp.Header.Get(HeaderRequestID)}
	}
	first := make(chan answer, 1)
	go func() { first <- send(`{"command":"true"}`, "req-first") }()
	waitFor(t, "the first forwarded submit to reach Apply", func() bool {
		leader.cluster.mu.Lock()
		defer leader.cluster.mu.Unlock()
		return leader.cluster.gated == 1
	})
	reqs := []struct{ body, id string }{
		{`{"command":"true","name":"a"}`, "req-a"},
		{`{"command":"true","name":"b"}`, "req-b"},
		{`{"command":"true","resources":{"cpu":64000}}`, "req-refused"},
		{`{"jobs":[{"command":"true"},{"command":"true"}]}`, "req-batch"},
	}
	out := make([]answer, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = send(r.body, r.id) }()
	}
	fsrv := follower.srv.Config.Handler.(*server)
	waitFor(t, "the submits to queue on the follower", func() bool { return fsrv.submits.queued() == len(reqs) })
	close(gate)
	wg.Wait()
	if a := <-first; a.err != nil || a.code != http.StatusCreated || a.id != "req-first" {
		t.Fatalf("first submit: %+v", a)
	}
	leader.cluster.mu.Lock()
	cmds := slices.Clone(leader.cluster.commands[before:])
	leader.cluster.mu.Unlock()
	if !slices.Contains(cmds, "submit_group") {
		t.Fatalf("leader entries %v: the submits were not grouped", cmds)
	}
	for i, r := range reqs {
		want := http.StatusCreated
		if r.id == "req-refused" {
			want = http.StatusBadRequest
		}
		if out[i].err != nil || out[i].code != want || out[i].id != r.id {
			t.Errorf("%s: %+v, want HTTP %d with its own X-Request-ID", r.id, out[i], want)
		}
	}
	committed := []string{"req-a", "req-b", "req-batch"}
	for _, l := range []struct {
		name string
		log  *logRecords
	}{{"leader", leaderLog}, {"follower", followerLog}} {
		got := idsIn(l.log.records(t, "submits committed"))
		for _, id := range append([]string{"req-first"}, committed...) {
			if !slices.Contains(got, id) {
				t.Errorf("%s: no \"submits committed\" line names %s (named: %v)", l.name, id, got)
			}
		}
		if got := idsIn(l.log.records(t, "grouped submit refused")); !slices.Contains(got, "req-refused") {
			t.Errorf("%s: the refused member's request ID is not logged (named: %v)", l.name, got)
		}
	}
}
