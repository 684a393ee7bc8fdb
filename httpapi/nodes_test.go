package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

func TestNodes(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	a.addNode("n1", "", 4000, 8192)
	a.addNode("n2", "", 2000, 4096)
	id := a.submit(`{"command":"true","resources":{"cpu":"1.5","memory":"1GiB"}}`)
	a.place(id, "n1")

	list, err := asServer[NodeList](a.client.ListNodes(ctx, api.NodeQuery{}))
	var nodes []NodeView
	if list != nil {
		nodes = list.Nodes
	}
	if err != nil || len(nodes) != 2 {
		t.Fatalf("nodes %+v %v", nodes, err)
	}
	if nodes[0].Name != "n1" || nodes[0].Running != 1 || nodes[0].Allocated.CPU != 1500 || nodes[0].Allocated.MemoryMB != 1024 {
		t.Fatalf("n1 view %+v", nodes[0])
	}
	if nodes[1].Running != 0 || nodes[1].Allocated.CPU != 0 {
		t.Fatalf("n2 view %+v", nodes[1])
	}

	d, err := asServer[NodeDetail](a.client.DrainNode(ctx, "n2", 10*time.Minute))
	if err != nil || d.Eligibility != fsm.Draining || !d.DrainDeadline.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("drain: %+v %v", d, err)
	}
	d, err = asServer[NodeDetail](a.client.SetEligibility(ctx, "n2", true))
	if err != nil || d.Eligibility != fsm.Eligible {
		t.Fatalf("eligible: %+v %v", d, err)
	}
	d, err = asServer[NodeDetail](a.client.GetNode(ctx, "n1"))
	if err != nil || len(d.Attempts) != 1 || d.Attempts[0].JobID != id {
		t.Fatalf("node detail %+v %v", d, err)
	}

	// down: only a client, which it commits dead; a raft member's liveness
	// is gossip's, and neither refusal changes anything.
	a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: "c1", HTTPAddr: "127.0.0.1:1", Role: fsm.RoleClient,
		Capacity: fsm.Resources{CPU: 1000, MemoryMB: 1024}, Drivers: []string{"process"}}})
	for _, tc := range []struct {
		node, want string
		code       int
	}{{"n1", "is a raft member", http.StatusConflict}, {"nope", "nope", http.StatusNotFound}} {
		before := a.f.AppliedIndex()
		if code, body := a.do("POST", "/v1/nodes/"+tc.node+"/down", ""); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("down %s: %d %s, want %d naming %q", tc.node, code, body, tc.code, tc.want)
		}
		if a.f.AppliedIndex() != before {
			t.Errorf("down %s changed the state", tc.node)
		}
	}
	d, err = asServer[NodeDetail](a.client.MarkDown(ctx, "c1"))
	if err != nil || d.Gossip != fsm.NodeDead || d.Role != fsm.RoleClient {
		t.Fatalf("down c1: %+v %v", d, err)
	}

	bad := []struct{ path, body, want string }{
		{"/v1/nodes/n1/eligibility", `{"eligibility":"draining"}`, "drain"},
		{"/v1/nodes/n1/eligibility", `{"eligibility":"maybe"}`, "eligibility: must be eligible or ineligible"},
		{"/v1/nodes/n1/eligibility", ``, "body: empty"},
		{"/v1/nodes/n1/drain", `{"deadline":"-5m"}`, "deadline: must not be negative"},
		{"/v1/nodes/n1/drain", `{"deadline":"soon"}`, "invalid duration"},
	}
	for _, tc := range bad {
		before := a.f.AppliedIndex()
		code, body := a.do("POST", tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %s: %d %s, want 400 with %q", tc.path, tc.body, code, body, tc.want)
		}
		if a.f.AppliedIndex() != before {
			t.Errorf("POST %s %s changed state", tc.path, tc.body)
		}
	}
}

func TestQueues(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	a.addNode("n1", "", 4000, 8192)
	id := a.submit(`{"command":"true","queue":"etl"}`)
	a.place(id, "n1")
	if _, err := a.client.SetQueue(ctx, "etl", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.SetQueue(ctx, "ml", 5); err != nil {
		t.Fatal(err)
	}
	qs, err := asServer[[]Queue](a.client.ListQueues(ctx))
	if err != nil {
		t.Fatal(err)
	}
	want := []Queue{{Name: "etl", MaxRunning: 2, Running: 1}, {Name: "ml", MaxRunning: 5}}
	if len(*qs) != len(want) || (*qs)[0] != want[0] || (*qs)[1] != want[1] {
		t.Fatalf("queues %+v, want %+v", qs, want)
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/queues/etl", `{"max_running":-1}`, "max_running: must be between 0"},
		{"/v1/queues/etl", `{}`, "max_running: is required"},
		{"/v1/queues/bad%20name", `{"max_running":1}`, "name: queue names"},
	} {
		code, body := a.do("PUT", tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("PUT %s %s: %d %s", tc.path, tc.body, code, body)
		}
	}
}

func TestClusterEndpoints(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	a.submit(`{"command":"true"}`)
	if err := a.client.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.client.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	a.cluster.readyErr = ErrNotReady
	if code, body := a.do("GET", "/v1/ready", ""); code != http.StatusServiceUnavailable || errorOf(t, body).Code != CodeNotReady {
		t.Fatalf("not ready: %d %s", code, body)
	}
	h, err := a.client.StateHash(ctx)
	if err != nil || h.Node != "n1" || h.Index != a.f.AppliedIndex() || h.Hash == "" {
		t.Fatalf("hash %+v %v", h, err)
	}
	ms, err := a.client.Members(ctx)
	if err != nil || len(ms) != 1 {
		t.Fatalf("members %+v %v", ms, err)
	}
	ri, err := a.client.Raft(ctx)
	if err != nil || ri.AppliedIndex != a.f.AppliedIndex() {
		t.Fatalf("raft %+v %v", ri, err)
	}
	if err := a.client.Join(ctx, []string{"10.0.0.2:7072"}); err != nil || len(a.cluster.joined) != 1 {
		t.Fatalf("join %v %v", a.cluster.joined, err)
	}
	if code, body := a.do("POST", "/v1/cluster/join", `{"addrs":[]}`); code != http.StatusBadRequest || !strings.Contains(body, "addrs") {
		t.Fatalf("empty join: %d %s", code, body)
	}
	if err := a.client.Leave(ctx); err != nil || !a.cluster.left {
		t.Fatalf("leave %v", err)
	}
}

type fakeUsage struct{}

func (fakeUsage) NodeUsage(node string) (float64, float64, bool, bool) {
	if node == "n2" {
		return 12.5, 64 << 20, true, true
	}
	return 0, 0, false, false
}

// TestNodeUsage: a node answers for itself (nothing measured: no fields),
// another node's usage is proxied to it, an unknown node is a 404.
func TestNodeUsage(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	// n2 shares n1's state and measures its own jobs.
	n2 := &fakeCluster{t: t, name: "n2", f: a.f}
	srv := httptest.NewServer(New(DefaultConfig(), Deps{Cluster: n2, State: a.f, Clock: fixedClock{t0}, Usage: fakeUsage{}, Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	a.addNode("n1", "", 4000, 8192)
	a.addNode("n2", strings.TrimPrefix(srv.URL, "http://"), 4000, 8192)

	u, err := a.client.NodeUsage(ctx, "n1")
	if err != nil || u.Node != "n1" || u.CPUSecondsTotal != nil || u.MemoryBytes != nil || !u.At.Equal(t0) {
		t.Fatalf("n1 (no usage source): %+v %v", u, err)
	}
	u, err = a.client.NodeUsage(ctx, "n2")
	if err != nil || u.Node != "n2" || u.CPUSecondsTotal == nil || *u.CPUSecondsTotal != 12.5 || u.MemoryBytes == nil || *u.MemoryBytes != 64<<20 {
		t.Fatalf("n2 through n1: %+v %v", u, err)
	}
	if code, body := a.do("GET", "/v1/nodes/nope/usage", ""); code != http.StatusNotFound {
		t.Fatalf("unknown node: %d %s", code, body)
	}
}

// GET /v1/nodes at fleet size: filters by role, state and name prefix, a
// page at a time with a cursor, and a summary of every node whatever the
// filters; bad filters are 400s naming the parameter.
func TestNodesFilterPageSummary(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	a.addNode("s1", "", 4000, 8192)
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: c, Role: fsm.RoleClient, Capacity: fsm.Resources{CPU: 1000}}})
	}
	a.cluster.must(fsm.CmdNodeState, fsm.SetNodeState{Name: "c4", Gossip: fsm.NodeDead})

	names := func(l *NodeList) string {
		if l == nil {
			return "<none>"
		}
		var out []string
		for _, n := range l.Nodes {
			out = append(out, n.Name)
		}
		return strings.Join(out, ",")
	}
	all, err := asServer[NodeList](a.client.ListNodes(ctx, api.NodeQuery{}))
	if err != nil || names(all) != "c1,c2,c3,c4,s1" || all.NextCursor != "" {
		t.Fatalf("all: %s next %q, %v", names(all), all.NextCursor, err)
	}
	if s := all.Summary; s.Total != 5 || s.ByRole["client"] != 4 || s.ByRole["server"] != 1 || s.ByState["alive"] != 4 || s.ByState["dead"] != 1 {
		t.Fatalf("summary %+v", s)
	}
	for _, tc := range []struct {
		q    NodeQuery
		want string
		next string
	}{
		{NodeQuery{Role: "client", State: "alive"}, "c1,c2,c3", ""},
		{NodeQuery{Role: "server"}, "s1", ""},
		{NodeQuery{State: "dead"}, "c4", ""},
		{NodeQuery{Name: "c"}, "c1,c2,c3,c4", ""},
		{NodeQuery{Role: "client", Limit: 2}, "c1,c2", "c2"},
		{NodeQuery{Role: "client", Limit: 2, Cursor: "c2"}, "c3,c4", ""},
	} {
		l, err := asServer[NodeList](a.client.ListNodes(ctx, api.NodeQuery(tc.q)))
		if err != nil {
			t.Errorf("%+v: %v", tc.q, err)
			continue
		}
		if names(l) != tc.want || l.NextCursor != tc.next || l.Summary.Total != 5 {
			t.Errorf("%+v: %s next %q total %d, %v; want %s next %q", tc.q, names(l), l.NextCursor, l.Summary.Total, err, tc.want, tc.next)
		}
	}
	for _, tc := range []struct{ query, want string }{
		{"role=voter", "role: must be server, replica or client"},
		{"state=gone", "state: must be alive, suspect, silent, dead or left"},
		{"limit=0", "limit: must be a number from 1"},
		{"limit=lots", "limit: must be a number from 1"},
	} {
		if code, body := a.do("GET", "/v1/nodes?"+tc.query, ""); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("GET /v1/nodes?%s: %d %s, want 400 naming %q", tc.query, code, body, tc.want)
		}
	}
}
