package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestResetNodeGPUs: unknown names are refused naming them and change
// nothing; no names reset every unhealthy device, recorded for the node.
func TestResetNodeGPUs(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "10.0.0.1:7070", 4000, 8192)
	gpus := []fsm.GPU{{UUID: "GPU-a", Index: 0}, {UUID: "GPU-b", Index: 1, Health: "xid 79"}}
	a.cluster.must(fsm.CmdNodeGPUs, fsm.NodeGPUs{Name: "n1", GPUs: gpus})
	before := a.f.AppliedIndex()
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/nodes/nope/gpus/reset", ``, http.StatusNotFound, "nope"},
		{"/v1/nodes/n1/gpus/reset", `{"uuids":["GPU-a","GPU-x"]}`, http.StatusBadRequest, `uuids[1]: node n1 has no GPU \"GPU-x\"`},
		{"/v1/nodes/n1/gpus/reset", `{"uuid":"GPU-a"}`, http.StatusBadRequest, "uuid"},
	} {
		code, body := a.do("POST", tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %s: %d %s, want %d naming %q", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	if a.f.AppliedIndex() != before {
		t.Fatal("a refused reset changed the state")
	}
	// A node with nothing unhealthy: nothing to reset, no entry.
	a.addNode("n2", "10.0.0.2:7070", 4000, 8192)
	before = a.f.AppliedIndex()
	if code, body := a.do("POST", "/v1/nodes/n2/gpus/reset", ``); code != http.StatusOK || !strings.Contains(body, `"uuids": []`) || a.f.AppliedIndex() != before {
		t.Fatalf("reset of a healthy node: %d %s", code, body)
	}
	code, body := a.do("POST", "/v1/nodes/n1/gpus/reset", ``)
	var out GPUResetResponse
	mustJSON(t, body, &out)
	if code != http.StatusOK || strings.Join(out.UUIDs, ",") != "GPU-b" || out.Index == 0 || !strings.HasPrefix(out.By, "a request from ") {
		t.Fatalf("reset: %d %s", code, body)
	}
	var nd NodeDetail
	code, body = a.do("GET", "/v1/nodes/n1", ``)
	mustJSON(t, body, &nd)
	if code != http.StatusOK || nd.GPUReset == nil || nd.GPUReset.Index != out.Index {
		t.Fatalf("node after the reset: %d %s", code, body)
	}
}
