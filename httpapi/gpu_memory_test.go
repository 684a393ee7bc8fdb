package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestSubmitGPUMemory: resources.gpu_memory is a share of one GPU; bad
// values are a 400 naming the field, and nothing is applied.
func TestSubmitGPUMemory(t *testing.T) {
	a := newTestAPI(t)
	a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{
		Name: "n1", Capacity: fsm.Resources{CPU: 4000, MemoryMB: 8192, Named: map[string]int64{"gpu": 1}}, Drivers: []string{"process"},
		GPUs: []fsm.GPU{{UUID: "GPU-aaaaaaaa", Index: 0, Model: "NVIDIA H200", MemoryMiB: 143771}},
	}})
	for _, tc := range []struct{ name, body, want string }{
		{"negative", `{"command":"true","resources":{"gpu_memory":-1}}`, "resources.gpu_memory: must be between 0"},
		{"negative string", `{"command":"true","resources":{"gpu_memory":"-2GiB"}}`, `resources.gpu_memory: "-2GiB" is negative`},
		{"zero alone", `{"command":"true","resources":{"gpu_memory":"0"}}`, "resources.gpu_memory: must be more than 0"},
		{"not a size", `{"command":"true","resources":{"gpu_memory":"lots"}}`, `resources.gpu_memory: "lots" is not a memory quantity`},
		{"not a size type", `{"command":"true","resources":{"gpu_memory":true}}`, "resources.gpu_memory: must be a number of MiB or a string with units"},
		{"with gpus 2", `{"command":"true","resources":{"gpus":2,"gpu_memory":"20GiB"}}`, "resources.gpu_memory: a share is of one GPU; with gpus 2"},
		{"larger than any GPU", `{"command":"true","resources":{"gpu_memory":"200GiB"}}`, "resources.gpu_memory: no GPU has 200GiB of memory (largest: n1 with 143771MiB)"},
	} {
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
				t.Fatal("a refused submit changed state")
			}
		})
	}
	for _, tc := range []struct {
		body string
		mib  int64
		gpus int64
	}{
		{`{"command":"true","resources":{"gpu_memory":"20GiB"}}`, 20480, 0},
		{`{"command":"true","resources":{"gpu_memory":1000}}`, 1000, 0},
		{`{"command":"true","resources":{"gpus":1,"gpu_memory":"60GiB"}}`, 61440, 0}, // gpus 1 is the same one device
		{`{"command":"true","resources":{"gpus":1,"gpu_memory":0}}`, 0, 1},
		{`{"command":"true","resources":{"gpu_memory":"200GiB"},"allow_unplaceable":true}`, 204800, 0},
	} {
		j := a.job(a.submit(tc.body))
		if r := j.Spec.Resources; r.GPUMemoryMiB != tc.mib || r.Named["gpu"] != tc.gpus {
			t.Errorf("%s: resources %+v, want gpu_memory %d and gpu %d", tc.body, r, tc.mib, tc.gpus)
		}
	}
}
