package httpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// POST /v1/nodes/drain and /v1/nodes/eligibility change every node a
// filter matches in one entry; a dry run, a filter that matches nothing
// and bad input change nothing and name the field.
func TestNodesDrainEligibilityBulk(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("s1", "", 4000, 8192)
	a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: "s2", Labels: map[string]string{"rack": "r1"}}})
	for _, c := range []string{"c1", "c2", "c3"} {
		rack := "r1"
		if c == "c3" {
			rack = "r2"
		}
		a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: c, Role: fsm.RoleClient, Labels: map[string]string{"rack": rack}}})
	}
	post := func(path, body string) (int, NodesChangeResponse, string) {
		t.Helper()
		code, out := a.do("POST", path, body)
		var r NodesChangeResponse
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
		}
		return code, r, out
	}
	eligibility := func() map[string]fsm.Eligibility {
		t.Helper()
		out := map[string]fsm.Eligibility{}
		if err := a.f.View(func(tx *fsm.Tx) error {
			nodes, err := tx.Nodes()
			for _, n := range nodes {
				out[n.Name] = n.Eligibility
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := a.f.AppliedIndex()
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/nodes/drain", `{}`, "labels: give labels or names"},
		{"/v1/nodes/drain", `{"role":"client"}`, "labels: give labels or names"},
		{"/v1/nodes/drain", `{"labels":{"rack":"r1"},"role":"boss"}`, "role: must be server, replica or client"},
		{"/v1/nodes/drain", `{"labels":{"":"r1"}}`, "labels: a label key is empty"},
		{"/v1/nodes/drain", `{"labels":{"rack":"r9"}}`, "labels: no node matches the filter: nothing changed"},
		{"/v1/nodes/drain", `{"names":["nope"]}`, "names: no node"},
		{"/v1/nodes/drain", `{"labels":{"rack":"r1"},"deadline":"-1s"}`, "deadline: must not be negative"},
		{"/v1/nodes/drain", `{"labels":{"rack":"r1"},"colour":1}`, "colour"},
		{"/v1/nodes/eligibility", `{"labels":{"rack":"r1"}}`, "eligibility: must be eligible or ineligible"},
		{"/v1/nodes/eligibility", `{"labels":{"rack":"r1"},"eligibility":"draining"}`, "eligibility: use POST /v1/nodes/drain"},
		{"/v1/nodes/eligibility", `{"labels":{"rack":"r2"},"role":"server","eligibility":"ineligible"}`, "labels: no node matches"},
	} {
		if code, _, out := post(tc.path, tc.body); code != http.StatusBadRequest || !strings.Contains(out, tc.want) {
			t.Errorf("%s %s: %d %s, want 400 naming %q", tc.path, tc.body, code, out, tc.want)
		}
	}
	if code, r, out := post("/v1/nodes/drain", `{"labels":{"rack":"r1"},"dry_run":true}`); code != http.StatusOK || strings.Join(r.Nodes, ",") != "c1,c2,s2" || !r.DryRun || r.Index != 0 {
		t.Fatalf("dry run: %d %s", code, out)
	}
	if got := a.f.AppliedIndex(); got != before {
		t.Fatalf("refusals and a dry run moved the applied index %d → %d", before, got)
	}

	// Drain the clients of rack r1 (not the server s2 there): one entry.
	code, r, out := post("/v1/nodes/drain", `{"labels":{"rack":"r1"},"role":"client","deadline":"10m"}`)
	if code != http.StatusOK || strings.Join(r.Nodes, ",") != "c1,c2" || r.Index != before+1 {
		t.Fatalf("drain: %d %s", code, out)
	}
	want := map[string]fsm.Eligibility{"s1": fsm.Eligible, "s2": fsm.Eligible, "c1": fsm.Draining, "c2": fsm.Draining, "c3": fsm.Eligible}
	if got := eligibility(); !maps.Equal(got, want) {
		t.Fatalf("after the drain: %v, want %v", got, want)
	}

	// Servers too: s2 ineligible by role; then the whole rack eligible
	// again, c3 (never changed) and nothing else.
	code, r, out = post("/v1/nodes/eligibility", `{"labels":{"rack":"r1"},"role":"server","eligibility":"ineligible"}`)
	if code != http.StatusOK || strings.Join(r.Nodes, ",") != "s2" || r.Index != before+2 {
		t.Fatalf("server ineligible: %d %s", code, out)
	}
	code, r, out = post("/v1/nodes/eligibility", `{"names":["c1","c2","c3","s2"],"eligibility":"eligible"}`)
	if code != http.StatusOK || strings.Join(r.Nodes, ",") != "c1,c2,s2" || strings.Join(r.Unchanged, ",") != "c3" || r.Index != before+3 {
		t.Fatalf("eligible again: %d %s", code, out)
	}
	// Every match is so already: nothing is written.
	code, r, out = post("/v1/nodes/eligibility", `{"labels":{"rack":"r1"},"eligibility":"eligible"}`)
	if code != http.StatusOK || len(r.Nodes) != 0 || r.Index != 0 || a.f.AppliedIndex() != before+3 {
		t.Fatalf("nothing to change: %d %s", code, out)
	}
	for name, e := range eligibility() {
		if e != fsm.Eligible {
			t.Errorf("%s: %s, want eligible", name, e)
		}
	}
}
