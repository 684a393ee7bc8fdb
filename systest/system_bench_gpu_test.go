package systest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu/gputest"
)

// BenchmarkGPULatency is the `foreman bench` figure of issue 24: submit →
// start and submit → finish of no-op process jobs, one at a time, on a
// real agent on the synthetic 8-GPU host (testdata/gpu/nvlink8), asking
// for no GPU, one, four (the leader picks the best-linked set; the node
// writes the device rules) and a 20 GiB VRAM share. On a GPU host, run
// `foreman bench latency --gpus 1` against the agent instead.
func BenchmarkGPULatency(b *testing.B) {
	root := gputest.Root(b, "nvlink8")
	smi := gputest.SMI(b, "print", "nvlink8")
	for range b.N {
		c := newSysCluster(b, 1, "--gpu-root", root, "--nvidia-smi", smi)
		addr := c.agents[0].url("")
		eventually(b, systemTimeout, "n1 lists its 8 GPUs", func() error {
			var nd gpuNodeView
			r := runForeman(b, c.bin, addr, "node", "show", "n1", "--json")
			if err := json.Unmarshal([]byte(r.stdout), &nd); err != nil {
				return err
			}
			if nd.Capacity.Named["gpu"] != 8 {
				return fmt.Errorf("capacity %v", nd.Capacity.Named)
			}
			return nil
		})
		for _, k := range []struct {
			name string
			args []string
		}{
			{"cpu", nil},
			{"gpus1", []string{"--gpus", "1"}},
			{"gpus4", []string{"--gpus", "4"}},
			{"share20GiB", []string{"--gpu-memory", "20GiB"}},
		} {
			r := runForeman(b, c.bin, addr, append([]string{"bench", "latency", "--jobs", "40", "--driver", "process", "--json"}, k.args...)...)
			if r.code != 0 {
				b.Fatalf("bench latency %v: exit %d %s", k.args, r.code, r.stderr)
			}
			var res struct {
				Errors      int     `json:"errors"`
				StartP50MS  float64 `json:"start_p50_ms"`
				FinishP50MS float64 `json:"finish_p50_ms"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Errors != 0 {
				b.Fatalf("bench latency %v: %v, %d jobs failed\n%s", k.args, err, res.Errors, r.stdout)
			}
			b.ReportMetric(res.StartP50MS, k.name+"-start-p50-ms")
			b.ReportMetric(res.FinishP50MS, k.name+"-finish-p50-ms")
		}
	}
}
