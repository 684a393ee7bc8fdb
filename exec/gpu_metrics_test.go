package exec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/exec/gpu/gputest"
)

// TestGPUMetrics scrapes the GPU collector over the H200 fixture's
// nvidia-smi: the device's gauges (an "[N/A]" one absent) and the memory
// of the job whose two processes use it, summed; a process of no job is
// not counted.
func TestGPUMetrics(t *testing.T) {
	root := gputest.Root(t, "h200")
	for pid, env := range map[string]string{"4242": "FOREMAN_JOB_ID=01JOB\x00", "4243": "PATH=/bin\x00FOREMAN_JOB_ID=01JOB\x00", "999": "PATH=/bin\x00"} {
		os.MkdirAll(filepath.Join(root, "proc", pid), 0o755)
		os.WriteFile(filepath.Join(root, "proc", pid, "environ"), []byte(env), 0o644)
	}
	c := &gpuCollector{nodes: map[string]*gpuSource{}}
	defer c.watch("n1", gpu.Config{Root: root, NvidiaSMI: gputest.SMI(t, "print", "h200")})()
	got := gatherGPU(t, c)
	uuid := "GPU-d87123f6-fea5-26be-6826-1c34038af791"
	want := map[string]float64{
		`foreman_gpu_utilization_ratio{node="n1",uuid="` + uuid + `"}`:            0.37,
		`foreman_gpu_memory_used_bytes{node="n1",uuid="` + uuid + `"}`:            81234 << 20,
		`foreman_gpu_temperature_celsius{node="n1",uuid="` + uuid + `"}`:          43,
		`foreman_gpu_power_watts{node="n1",uuid="` + uuid + `"}`:                  81.33,
		`foreman_job_gpu_memory_bytes{job="01JOB",node="n1",uuid="` + uuid + `"}`: (80000 + 1000) << 20,
		// pmon: 4242 87%, 4243 "-" (no kernel ran), 999 is no job's.
		`foreman_job_gpu_sm_ratio{job="01JOB",node="n1",uuid="` + uuid + `"}`: 0.87,
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// nvidia-smi failing: no GPU series, the scrape still answers.
	f := &gpuCollector{nodes: map[string]*gpuSource{}}
	defer f.watch("n1", gpu.Config{Root: root, NvidiaSMI: gputest.SMI(t, "fail", "h200")})()
	if got := gatherGPU(t, f); len(got) != 0 {
		t.Errorf("nvidia-smi failing: %v; want no series", got)
	}
}

// gatherGPU scrapes c alone: "name{label=...,...}" -> value.
func gatherGPU(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestJobGPUUsage: one job's memory and SM use on its devices, from the
// node's sample; a device the job has no process on reads 0, and a failing
// nvidia-smi leaves the values unknown with a note.
func TestJobGPUUsage(t *testing.T) {
	root := gputest.Root(t, "h200")
	for pid, env := range map[string]string{"4242": "FOREMAN_JOB_ID=01JOB\x00", "4243": "FOREMAN_JOB_ID=01JOB\x00", "999": "FOREMAN_JOB_ID=01OTHER\x00"} {
		os.MkdirAll(filepath.Join(root, "proc", pid), 0o755)
		os.WriteFile(filepath.Join(root, "proc", pid, "environ"), []byte(env), 0o644)
	}
	uuid := "GPU-d87123f6-fea5-26be-6826-1c34038af791"
	if _, _, _, err := JobGPUUsage("tju-none", "01JOB", []string{uuid}); !errors.Is(err, ErrNoGPUSampling) {
		t.Fatalf("a node without GPU sampling: %v", err)
	}
	defer gpuUsage().watch("tju", gpu.Config{Root: root, NvidiaSMI: gputest.SMI(t, "print", "h200")})()
	devs, at, note, err := JobGPUUsage("tju", "01JOB", []string{uuid, "GPU-other"})
	if err != nil || note != "" || at.IsZero() || len(devs) != 2 {
		t.Fatalf("devs %+v at %v note %q err %v", devs, at, note, err)
	}
	if d := devs[0]; d.UUID != uuid || d.MemoryBytes == nil || *d.MemoryBytes != 81000<<20 || d.SMRatio == nil || *d.SMRatio != 0.87 {
		t.Errorf("its device: %+v", d)
	}
	if d := devs[1]; d.MemoryBytes == nil || *d.MemoryBytes != 0 || d.SMRatio == nil || *d.SMRatio != 0 {
		t.Errorf("a device it has no process on: %+v", d)
	}
	defer gpuUsage().watch("tju-fail", gpu.Config{Root: root, NvidiaSMI: gputest.SMI(t, "fail", "h200")})()
	devs, _, note, err = JobGPUUsage("tju-fail", "01JOB", []string{uuid})
	if err != nil || len(devs) != 1 || devs[0].MemoryBytes != nil || devs[0].SMRatio != nil || !strings.Contains(note, "memory:") || !strings.Contains(note, "sm:") {
		t.Errorf("nvidia-smi failing: %+v note %q err %v", devs, note, err)
	}
}
