package httpapi

import (
	"encoding/json"
	"net/http"
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
