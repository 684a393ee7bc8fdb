package gpu_test

import (
	"math"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu"
)

func TestParseUsage(t *testing.T) {
	u := gpu.ParseUsage([]byte("GPU-a, 37, 81234, 43, 81.33, [N/A]\nnot a row\n, 1, 2, 3, 4, 5\nGPU-b, [Not Supported], 0, 30, 60.5, 2\n"))
	if len(u) != 2 || u[0].UUID != "GPU-a" || u[0].UtilPct != 37 || !math.IsNaN(u[0].ECCUE) || !math.IsNaN(u[1].UtilPct) || u[1].ECCUE != 2 {
		t.Errorf("got %+v", u)
	}
	a := gpu.ParseApps([]byte("4242, GPU-a, 80000\nx, GPU-a, 1\n-1, GPU-a, 1\n7, nope, 1\n8, GPU-b, [N/A]\n"))
	if len(a) != 2 || a[0].PID != 4242 || a[0].MemMiB != 80000 || a[1].PID != 8 || !math.IsNaN(a[1].MemMiB) {
		t.Errorf("got %+v", a)
	}
}

func FuzzParseUsage(f *testing.F) {
	f.Add([]byte("GPU-a, 37, 81234, 43, 81.33, [N/A]\n4242, GPU-a, 80000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, u := range gpu.ParseUsage(b) {
			if u.UUID == "" {
				t.Fatal("a row without a UUID")
			}
		}
		for _, a := range gpu.ParseApps(b) {
			if a.PID <= 0 {
				t.Fatal("a process without a pid")
			}
		}
	})
}
