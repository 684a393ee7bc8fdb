package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// Clients whose silence the leader holds are shown silent, with since
// when, in the list, its summary, its state filter and a node's detail;
// their records stay alive. An empty held set shows them alive again.
func TestNodesShowHeldSilence(t *testing.T) {
	a := newTestAPI(t)
	for _, c := range []string{"c1", "c2"} {
		a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: c, Role: fsm.RoleClient, Capacity: fsm.Resources{CPU: 1000}}})
	}
	a.cluster.must(fsm.CmdSilentClients, fsm.SilentClients{Clients: []fsm.SilentClient{{Name: "c1", Since: t0}}})
	type view struct {
		Name        string `json:"name"`
		Gossip      string `json:"gossip"`
		SilentSince string `json:"silent_since"`
	}
	get := func(path string, out any) {
		t.Helper()
		code, body := a.do("GET", path, "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		if err := json.Unmarshal([]byte(body), out); err != nil {
			t.Fatal(err)
		}
	}
	var l struct {
		Nodes   []view `json:"nodes"`
		Summary struct {
			ByState map[string]int `json:"by_state"`
		} `json:"summary"`
	}
	get("/v1/nodes", &l)
	if len(l.Nodes) != 2 || l.Nodes[0].Gossip != "silent" || l.Nodes[0].SilentSince != "2030-01-02T03:04:05Z" || l.Nodes[1].Gossip != "alive" || l.Nodes[1].SilentSince != "" {
		t.Fatalf("nodes %+v", l.Nodes)
	}
	if s := l.Summary.ByState; s["silent"] != 1 || s["alive"] != 1 {
		t.Fatalf("by_state %v", s)
	}
	l.Nodes = nil
	get("/v1/nodes?state=silent", &l)
	if len(l.Nodes) != 1 || l.Nodes[0].Name != "c1" {
		t.Fatalf("?state=silent: %+v", l.Nodes)
	}
	var d view
	get("/v1/nodes/c1", &d)
	if d.Gossip != "silent" || d.SilentSince == "" {
		t.Fatalf("detail %+v", d)
	}
	if err := a.f.View(func(tx *fsm.Tx) error {
		n, err := tx.Node("c1")
		if err == nil && n.Gossip != fsm.NodeAlive {
			t.Errorf("record %s, want alive (only the shown state changes)", n.Gossip)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	a.cluster.must(fsm.CmdSilentClients, fsm.SilentClients{})
	d = view{}
	get("/v1/nodes/c1", &d)
	if d.Gossip != "alive" || d.SilentSince != "" {
		t.Fatalf("after the hold: %+v", d)
	}
}

// POST /v1/nodes/down takes the silent clients down in one entry; a dry
// run changes nothing; a filter that matches nothing, a server or nothing
// at all is refused naming the field.
func TestNodesDownBulk(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("s1", "", 4000, 8192)
	for _, c := range []string{"c1", "c2", "c3"} {
		a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: c, Role: fsm.RoleClient, Labels: map[string]string{"rack": "r" + c[1:]}}})
	}
	post := func(body string) (int, NodesDownResponse, string) {
		t.Helper()
		code, out := a.do("POST", "/v1/nodes/down", body)
		var r NodesDownResponse
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
		}
		return code, r, out
	}
	if code, _, out := post(`{"silent":true}`); code != http.StatusBadRequest || !strings.Contains(out, "silent: no client is silent") {
		t.Fatalf("nothing silent: %d %s", code, out)
	}
	a.cluster.must(fsm.CmdSilentClients, fsm.SilentClients{Clients: []fsm.SilentClient{{Name: "c1", Since: t0}, {Name: "c2", Since: t0}}})
	before := a.f.AppliedIndex()
	for body, want := range map[string]string{
		`{}`:                                 "silent: give silent, labels or names",
		`{"silent":true,"role":"server"}`:    "role: only client",
		`{"names":["s1"]}`:                   "node s1 is a raft member",
		`{"names":["nope"]}`:                 "names: no node",
		`{"silent":true,"silent_for":"-1s"}`: "silent_for: must not be negative",
		`{"labels":{"rack":"r9"}}`:           "labels: no live client matches",
		`{"silent":true,"colour":1}`:         "colour",
	} {
		if code, _, out := post(body); code != http.StatusBadRequest || !strings.Contains(out, want) {
			t.Errorf("%s: %d %s, want 400 naming %q", body, code, out, want)
		}
	}
	if code, r, out := post(`{"silent":true,"dry_run":true}`); code != http.StatusOK || strings.Join(r.Nodes, ",") != "c1,c2" || !r.DryRun {
		t.Fatalf("dry run: %d %s", code, out)
	}
	if got := a.f.AppliedIndex(); got != before {
		t.Fatalf("refusals and a dry run moved the applied index %d → %d", before, got)
	}
	code, r, out := post(`{"silent":true,"labels":{"rack":"r1"}}`)
	if code != http.StatusOK || strings.Join(r.Nodes, ",") != "c1" || r.Index != before+1 {
		t.Fatalf("down c1: %d %s", code, out)
	}
	code, r, out = post(`{"silent":true}`)
	if code != http.StatusOK || strings.Join(r.Nodes, ",") != "c2" || r.Index != before+2 {
		t.Fatalf("down the rest, in one entry: %d %s", code, out)
	}
	if err := a.f.View(func(tx *fsm.Tx) error {
		for name, want := range map[string]fsm.GossipState{"c1": fsm.NodeDead, "c2": fsm.NodeDead, "c3": fsm.NodeAlive, "s1": fsm.NodeAlive} {
			n, err := tx.Node(name)
			if err != nil {
				return err
			}
			if n.Gossip != want {
				t.Errorf("%s: %s, want %s", name, n.Gossip, want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
