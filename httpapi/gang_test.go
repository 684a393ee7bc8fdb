package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

func TestSubmitGangRefused(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "10.0.0.1:7070", 4000, 8192)
	a.addNode("n2", "10.0.0.2:7070", 4000, 8192)
	a.addNode("n3", "10.0.0.3:7070", 1000, 8192)
	tests := []struct{ name, body, want string }{
		{"size 0", `{"command":"true","gang":{"size":0}}`, "gang.size: must be at least 2"},
		{"size 1", `{"command":"true","gang":{"size":1}}`, "gang.size: must be at least 2"},
		{"too large", `{"command":"true","gang":{"size":1000}}`, "gang.size: must be at most 256"},
		{"more than the nodes", `{"command":"true","gang":{"size":4}}`, "gang.size: 4 tasks on distinct nodes need 4 nodes that can hold one task; the cluster has 3 (of 3 nodes)"},
		{"no 3 nodes hold it", `{"command":"true","resources":{"cpu":"2"},"gang":{"size":3}}`, "the cluster has 2 (of 3 nodes)"},
		{"http gang", `{"driver":"http","http":{"method":"GET","url":"http://example.com/"},"gang":{"size":2}}`, "gang: an http job cannot be a gang"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := a.f.AppliedIndex()
			code, body := a.do("POST", "/v1/jobs", tc.body)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %s", code, body)
			}
			if e := errorOf(t, body); !strings.Contains(e.Error, tc.want) || e.Code != CodeInvalid {
				t.Fatalf("error %+v, want %q", e, tc.want)
			}
			if a.f.AppliedIndex() != before {
				t.Fatal("a refused gang changed state")
			}
		})
	}
	// Packing, or allow_unplaceable, lets a gang larger than the cluster in.
	a.submit(`{"command":"true","gang":{"size":4,"spread":false}}`)
	a.submit(`{"command":"true","gang":{"size":4},"allow_unplaceable":true}`)
}

func TestJobTasks(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "10.0.0.1:7070", 4000, 8192)
	a.addNode("n2", "10.0.0.2:7070", 4000, 8192)
	id := a.submit(`{"command":"true","gang":{"size":2}}`)
	plain := a.submit(`{"command":"true"}`)
	r := a.cluster.must(fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: id, Node: "n1",
		Tasks: []fsm.TaskSlot{{Node: "n1", Port: 31000}, {Node: "n2", Port: 31000}}}}})
	if len(r.Skipped) > 0 {
		t.Fatalf("skipped %v", r.Skipped)
	}
	tl, err := a.client.JobTasks(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if tl.Size != 2 || tl.Token != r.Index || len(tl.Tasks) != 2 {
		t.Fatalf("tasks %+v", tl)
	}
	for i, ts := range tl.Tasks {
		if ts.Latest == nil || ts.Latest.Task.Index != i || ts.Latest.Attempt != i+1 || len(ts.Attempts) != 1 {
			t.Fatalf("task %d: %+v", i, ts)
		}
		if got := strings.Join(ts.Latest.Task.Peers, ","); got != "10.0.0.1:31000,10.0.0.2:31000" {
			t.Fatalf("peers %s", got)
		}
	}
	if code, body := a.do("GET", "/v1/jobs/"+plain+"/tasks", ""); code != http.StatusConflict || !strings.Contains(body, "not a gang") {
		t.Fatalf("tasks of a plain job: %d %s", code, body)
	}
}

func TestCheckpointAPI(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "10.0.0.1:7070", 4000, 8192)
	id := a.submit(`{"command":"true"}`)
	if code, _ := a.do("GET", "/v1/jobs/"+id+"/checkpoint", ""); code != http.StatusNotFound {
		t.Fatalf("no checkpoint yet: %d", code)
	}
	info, err := a.client.PutCheckpoint(t.Context(), id, []byte("epoch=3"))
	if err != nil || info.Bytes != 7 {
		t.Fatalf("put: %+v %v", info, err)
	}
	got, err := a.client.Checkpoint(t.Context(), id)
	if err != nil || string(got) != "epoch=3" {
		t.Fatalf("get: %q %v", got, err)
	}
	before := a.f.AppliedIndex()
	code, body := a.do("POST", "/v1/jobs/"+id+"/checkpoint", strings.Repeat("x", fsm.CheckpointMax+1))
	if code != http.StatusBadRequest || !strings.Contains(body, "at most 1048576 bytes") || a.f.AppliedIndex() != before {
		t.Fatalf("oversized checkpoint: %d %s", code, body)
	}
	if code, _ := a.do("POST", "/v1/jobs/nope/checkpoint", "x"); code != http.StatusNotFound {
		t.Fatalf("checkpoint of an unknown job: %d", code)
	}
}
