package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// dirArtifacts serves <dir>/<job>/<path>, like the agent's adapter over
// exec.Worker (fs.ErrNotExist when missing).
type dirArtifacts struct{ dir string }

func (d dirArtifacts) OpenArtifact(jobID string, attempt int, path string) (*os.File, error) {
	return os.Open(filepath.Join(d.dir, jobID, filepath.FromSlash(path)))
}

// newArtifactsAPI is an API on node n1 (the leader) whose artifacts are
// the files under dir/<job>/.
func newArtifactsAPI(t *testing.T) (a *testAPI, cl *fakeCluster, dir string) {
	f := openFSM(t)
	dir = t.TempDir()
	cl = &fakeCluster{t: t, name: "n1", f: f, leader: true}
	srv := httptest.NewServer(New(DefaultConfig(), Deps{Cluster: cl, State: f, Artifacts: dirArtifacts{dir},
		Clock: fixedClock{t0}, Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	cl.leaderName, cl.leaderAddr = "n1", strings.TrimPrefix(srv.URL, "http://")
	return &testAPI{t: t, f: f, cluster: cl, srv: srv, logs: &fakeLogs{}}, cl, dir
}

// TestArtifactsAPI: the list comes from the attempt record; a listed file
// on this node is served with its length; a path that escapes is a 400
// naming path, an unlisted one a 404; a file whose only node is dead is a
// 502 naming the node.
func TestArtifactsAPI(t *testing.T) {
	a, cl, dir := newArtifactsAPI(t)
	srv := a.srv
	a.client = apiClient(t, srv.URL, "")
	a.addNode("n1", cl.leaderAddr, 4000, 4096)
	a.addNode("n2", "127.0.0.1:1", 4000, 4096)
	finish := func(node string, arts []fsm.Artifact) string {
		id := a.submit(`{"command":"true","driver":"process"}`)
		tok := a.place(id, node)
		cl.must(fsm.CmdReport, fsm.ReportAttempt{JobID: id, Attempt: 1, FencingToken: tok, Node: node,
			State: fsm.AttemptSucceeded, ExitCode: new(int), Artifacts: arts})
		return id
	}
	here := finish("n1", []fsm.Artifact{{Path: "a.txt", Size: 5}, {Path: "d/b.bin", Size: 3}})
	os.MkdirAll(filepath.Join(dir, here, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, here, "a.txt"), []byte("hello"), 0o644)
	os.WriteFile(filepath.Join(dir, here, "d", "b.bin"), []byte{1, 2, 3}, 0o644)
	there := finish("n2", []fsm.Artifact{{Path: "x", Size: 1}})
	cl.must(fsm.CmdNodeState, fsm.SetNodeState{Name: "n2", Gossip: fsm.NodeDead})

	l, err := a.client.ListArtifacts(t.Context(), here, 0)
	if err != nil || l.Node != "n1" || l.Attempt != 1 || len(l.Artifacts) != 2 || l.TotalBytes != 8 || l.NodeStatus != "alive" {
		t.Fatalf("list: %+v %v", l, err)
	}
	var sb strings.Builder
	if n, err := a.client.GetArtifact(t.Context(), here, 0, "d/b.bin", &sb); err != nil || n != 3 {
		t.Fatalf("get d/b.bin: %d %v", n, err)
	}
	resp, err := http.Get(srv.URL + "/v1/jobs/" + here + "/artifacts/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello" || resp.Header.Get("Content-Length") != "5" || resp.Header.Get(HeaderArtifactNode) != "n1" {
		t.Fatalf("GET a.txt: %d %q %v", resp.StatusCode, b, resp.Header)
	}
	for _, tc := range []struct {
		path string
		code int
		text string
	}{
		{"..%2Fsecret", 400, `"path`},
		{"d%2F..%2F..%2Fsecret", 400, `"path`},
		{"%2Fetc%2Fpasswd", 400, `"path`},
		{"nope.txt", 404, "no artifact"},
		{"d%2Fb.bin?attempt=x", 400, `"attempt`},
		{"a.txt?attempt=7", 404, "not_found"},
	} {
		if code, body := a.do("GET", "/v1/jobs/"+here+"/artifacts/"+tc.path, ""); code != tc.code || !strings.Contains(body, tc.text) {
			t.Errorf("GET %s: %d %s, want %d with %s", tc.path, code, body, tc.code, tc.text)
		}
	}
	if _, err := a.client.GetArtifact(t.Context(), there, 0, "x", io.Discard); err == nil || !strings.Contains(err.Error(), "only on node n2, which is dead") {
		t.Errorf("artifact on a dead node: %v", err)
	}
}

// An artifact read with min_index waits until this node has applied that
// index: the node that asks knows of the artifact (the attempt's finish)
// before this one, a follower, applied it. Without the wait it was a 404
// for a file that is there (TestSystemSecureArtifacts saw it under load).
func TestArtifactWaitsForMinIndex(t *testing.T) {
	a, cl, dir := newArtifactsAPI(t)
	f := a.f
	a.addNode("n1", cl.leaderAddr, 4000, 4096)
	id := a.submit(`{"command":"true","driver":"process"}`)
	tok := a.place(id, "n1")
	os.MkdirAll(filepath.Join(dir, id), 0o755)
	os.WriteFile(filepath.Join(dir, id, "a.txt"), []byte("hello"), 0o644)

	waiting := make(chan struct{}, 1)
	waitingForIndex = func() { waiting <- struct{}{} }
	t.Cleanup(func() { waitingForIndex = func() {} })
	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	finishAt := f.AppliedIndex() + 1
	go func() {
		code, body := a.do("GET", "/v1/jobs/"+id+"/artifacts/a.txt?attempt=1&min_index="+strconv.FormatUint(finishAt, 10), "")
		got <- answer{code, body}
	}()
	select {
	case <-waiting:
	case r := <-got:
		t.Fatalf("GET with min_index %d answered at once: %d %s", finishAt, r.code, r.body)
	}
	cl.must(fsm.CmdReport, fsm.ReportAttempt{JobID: id, Attempt: 1, FencingToken: tok, Node: "n1",
		State: fsm.AttemptSucceeded, ExitCode: new(int), Artifacts: []fsm.Artifact{{Path: "a.txt", Size: 5}}})
	if r := <-got; r.code != 200 || r.body != "hello" {
		t.Fatalf("GET with min_index %d: %d %s, want 200 hello", finishAt, r.code, r.body)
	}
	if code, body := a.do("GET", "/v1/jobs/"+id+"/artifacts/a.txt?min_index=x", ""); code != 400 || !strings.Contains(body, `"min_index`) {
		t.Errorf("min_index=x: %d %s, want a 400 naming min_index", code, body)
	}
}
