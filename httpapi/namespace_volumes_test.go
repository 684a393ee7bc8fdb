package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// A namespace whose policy lists volumes allows only those; without a
// list any volume a node declares will do; a bad name in the policy is a
// 400.
func TestNamespaceVolumesPolicy(t *testing.T) {
	a := newTestAPI(t)
	a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: "n1", Capacity: fsm.Resources{CPU: 4000, MemoryMB: 8192}, Drivers: []string{"process"},
		Volumes: []fsm.HostVolume{{Name: "datasets", Path: "/mnt/d"}, {Name: "scratch", Path: "/mnt/s"}}}})
	if code, body := a.do("PUT", "/v1/namespaces/ml", `{"volumes":["datasets"]}`); code != http.StatusOK || !strings.Contains(body, `"volumes": [`) {
		t.Fatalf("put: %d %s", code, body)
	}
	if code, body := a.do("PUT", "/v1/namespaces/bad", `{"volumes":["/etc"]}`); code != http.StatusBadRequest || !strings.HasPrefix(errorOf(t, body).Error, "volumes[0]: ") {
		t.Fatalf("a path in the policy: %d %s", code, body)
	}
	for _, tc := range []struct {
		path, body, field string
	}{
		{"/v1/jobs?namespace=ml", `{"command":"true","volumes":["datasets:/d"]}`, ""},
		{"/v1/jobs?namespace=ml", `{"command":"true","volumes":["datasets:/d","scratch:/s"]}`, "volumes[1]"},
		{"/v1/jobs", `{"command":"true","volumes":["scratch:/s"]}`, ""},
	} {
		code, body := a.do("POST", tc.path, tc.body)
		if tc.field == "" {
			if code != http.StatusCreated {
				t.Errorf("POST %s %s: %d %s, want 201", tc.path, tc.body, code, body)
			}
			continue
		}
		if code != http.StatusBadRequest || !strings.HasPrefix(errorOf(t, body).Error, tc.field+": volume \"scratch\" is not allowed in namespace ml") {
			t.Errorf("POST %s %s: %d %s, want 400 naming %s", tc.path, tc.body, code, body, tc.field)
		}
	}
}
