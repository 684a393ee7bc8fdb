package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// t0 is the fixed "now" of every test.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// fakeCluster applies commands straight to a real FSM, as raft would on a
// single node. leader and the leader's address are set by the test.
type fakeCluster struct {
	t          testing.TB
	name       string
	f          *fsm.FSM
	mu         sync.Mutex
	idx        uint64
	leader     bool
	leaderName string
	leaderAddr string
	readyErr   error
	consistent int // ConsistentRead calls
	readErr    error
	joined     []string
	left       bool
	// applyGate, when set, holds every Apply until it can receive from it
	// (tests that need submits to pile up).
	applyGate chan struct{}
	gated     int               // Applies waiting at applyGate
	commands  []fsm.CommandType // every command applied, in order
	features  fsm.FeatureGate   // the servers' advertised features (zero: all enabled)
}

func (c *fakeCluster) Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	c.mu.Lock()
	gate := c.applyGate
	c.mu.Unlock()
	if gate != nil {
		c.mu.Lock()
		c.gated++
		c.mu.Unlock()
		<-gate
		c.mu.Lock()
		c.gated--
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leader {
		return nil, fmt.Errorf("%w: fake follower", ErrNoLeader)
	}
	// As cluster.Node.Apply: nothing is proposed that a server lacks.
	if need, err := cmd.Needs(); err == nil {
		if err := c.features.Check(need); err != nil {
			return nil, err
		}
	}
	return c.applyLocked(cmd), nil
}

func (c *fakeCluster) applyLocked(cmd *fsm.Command) *fsm.Result {
	b, err := cmd.Encode()
	if err != nil {
		c.t.Fatalf("encode: %v", err)
	}
	if c.idx < c.f.AppliedIndex() {
		c.idx = c.f.AppliedIndex()
	}
	c.idx++
	c.commands = append(c.commands, cmd.Type)
	res := c.f.ApplyBatch([]*raft.Log{{Index: c.idx, Term: 1, Type: raft.LogCommand, Data: b}})
	r, ok := res[0].(*fsm.Result)
	if !ok {
		c.t.Fatalf("ApplyBatch returned %T", res[0])
	}
	return r
}

// must applies a setup command and fails the test if it is refused.
func (c *fakeCluster) must(typ fsm.CommandType, payload any) *fsm.Result {
	c.t.Helper()
	cmd, err := fsm.NewCommand(typ, t0, payload)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.applyLocked(cmd)
	if r.Err != nil {
		c.t.Fatalf("%s: %v", typ, r.Err)
	}
	return r
}

func (c *fakeCluster) IsLeader() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.leader }
func (c *fakeCluster) Leader() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaderName, c.leaderAddr
}
func (c *fakeCluster) ConsistentRead(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.consistent++
	return c.readErr
}
func (c *fakeCluster) NodeName() string { return c.name }
func (c *fakeCluster) Members() []Member {
	return []Member{{Name: c.name, Status: "alive", RaftRole: "leader", Voter: true, Leader: c.leader}}
}
func (c *fakeCluster) RaftInfo() RaftInfo { return RaftInfo{Node: c.name, State: "Leader", Term: 1} }
func (c *fakeCluster) Ready() error       { return c.readyErr }
func (c *fakeCluster) Join(addrs []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joined = append(c.joined, addrs...)
	return nil
}
func (c *fakeCluster) Leave(context.Context) error { c.left = true; return nil }
func (c *fakeCluster) FeatureGate() fsm.FeatureGate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.features
}

// fakeLogs serves fixed log text for attempts this node ran.
type fakeLogs struct {
	logs map[string]string // "job/attempt/stream" → text
}

func (l *fakeLogs) StreamLog(ctx context.Context, jobID string, attempt int, stream string, follow bool, out io.Writer) error {
	s, ok := l.logs[fmt.Sprintf("%s/%d/%s", jobID, attempt, stream)]
	if !ok {
		return fmt.Errorf("attempt %s/%d: %w", jobID, attempt, fs.ErrNotExist)
	}
	_, err := io.WriteString(out, s)
	return err
}

// testAPI is one API node over a real FSM.
type testAPI struct {
	t       *testing.T
	f       *fsm.FSM
	cluster *fakeCluster
	logs    *fakeLogs
	srv     *httptest.Server
	client  *api.Client
}

func openFSM(t *testing.T) *fsm.FSM {
	t.Helper()
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true})
	if err != nil {
		t.Fatalf("fsm.Open: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// newTestAPI starts a leader API node named "n1" on its own FSM.
func newTestAPI(t *testing.T, mod ...func(*Config)) *testAPI {
	t.Helper()
	return newTestAPIOn(t, openFSM(t), "n1", true, mod...)
}

func newTestAPIOn(t *testing.T, f *fsm.FSM, name string, leader bool, mod ...func(*Config)) *testAPI {
	t.Helper()
	return newTestAPIWith(t, f, name, leader, nil, mod...)
}

// newTestAPIWith is newTestAPIOn with an Operator (nil: none).
func newTestAPIWith(t *testing.T, f *fsm.FSM, name string, leader bool, ops Operator, mod ...func(*Config)) *testAPI {
	t.Helper()
	cfg := DefaultConfig()
	for _, m := range mod {
		m(&cfg)
	}
	a := &testAPI{t: t, f: f, logs: &fakeLogs{logs: map[string]string{}}}
	a.cluster = &fakeCluster{t: t, name: name, f: f, leader: leader}
	h := New(cfg, Deps{Cluster: a.cluster, State: f, Logs: a.logs, Operator: ops, Clock: fixedClock{t0}, Logger: slog.New(slog.DiscardHandler)})
	a.srv = httptest.NewServer(h)
	t.Cleanup(a.srv.Close)
	if leader {
		a.cluster.leaderName, a.cluster.leaderAddr = name, strings.TrimPrefix(a.srv.URL, "http://")
	}
	a.client = apiClient(t, a.srv.URL, "")
	return a
}

// apiClient is the public client (package api) of the server at url, set
// as the CLI sets it: failing fast, waiting out 429s.
func apiClient(t testing.TB, url, token string) *api.Client {
	t.Helper()
	cl, err := api.NewClient(api.Config{Address: url, Token: token, HTTPClient: &http.Client{},
		MaxRetries: math.MaxInt32, MaxRetryWait: 30 * time.Second, FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// submitJob submits spec as it is, with key (if any) as its
// Idempotency-Key: the submit the CLI makes.
func submitJob(ctx context.Context, cl *api.Client, spec any, key string) (id string, dup bool, err error) {
	var hdr http.Header
	if key != "" {
		hdr = http.Header{HeaderIdempotencyKey: {key}}
	}
	var out SubmitResponse
	if err := cl.Do(ctx, api.Request{Method: http.MethodPost, Path: "/v1/jobs", Body: spec, Header: hdr}, &out); err != nil {
		return "", false, err
	}
	return out.ID, out.Duplicate, nil
}

// jobDetail reads a job as this package's type.
func jobDetail(ctx context.Context, cl *api.Client, id string) (*JobDetail, error) {
	return asServer[JobDetail](cl.GetJob(ctx, id))
}

// asServer re-reads a reply of package api as this package's type of the
// same JSON (TestAPITypesKeepServerJSON), for checks written on fsm's
// states; a call's error passes through.
func asServer[T any](reply any, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// do sends a raw request and returns the status and body.
func (a *testAPI) do(method, path, body string, hdr ...string) (int, string) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// addNode registers an alive, eligible node with capacity.
func (a *testAPI) addNode(name, httpAddr string, cpu, mem int64) {
	a.t.Helper()
	a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{
		Name: name, HTTPAddr: httpAddr, Capacity: fsm.Resources{CPU: cpu, MemoryMB: mem}, Drivers: []string{"process"},
	}})
}

// submit submits a JSON spec and returns the job ID.
func (a *testAPI) submit(spec string) string {
	a.t.Helper()
	code, body := a.do("POST", "/v1/jobs", spec)
	if code != http.StatusCreated {
		a.t.Fatalf("submit %s: %d %s", spec, code, body)
	}
	var r SubmitResponse
	mustJSON(a.t, body, &r)
	return r.ID
}

// place puts a queued job on node and returns the attempt's fencing token.
func (a *testAPI) place(jobID, node string) uint64 {
	a.t.Helper()
	res := a.job(jobID).Spec.Resources
	r := a.cluster.must(fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: jobID, Node: node, Resources: res}}})
	if len(r.Skipped) > 0 {
		a.t.Fatalf("place skipped: %v", r.Skipped)
	}
	return r.Index
}

func (a *testAPI) job(id string) fsm.Job {
	a.t.Helper()
	var j *fsm.Job
	if err := a.f.View(func(tx *fsm.Tx) error {
		var err error
		j, err = tx.Job(id)
		return err
	}); err != nil {
		a.t.Fatalf("job %s: %v", id, err)
	}
	return *j
}

func mustJSON(t testing.TB, body string, v any) {
	t.Helper()
	if err := json.NewDecoder(bytes.NewReader([]byte(body))).Decode(v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
}

// errorOf decodes an error body.
func errorOf(t testing.TB, body string) ErrorBody {
	t.Helper()
	var e ErrorBody
	mustJSON(t, body, &e)
	return e
}
