package sched

import (
	"fmt"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// BenchmarkBestGPUSet is the device pick alone: exhaustive on an 8-GPU
// host (C(8,4) = 70 sets), greedy on a 16-GPU one asking for 8.
func BenchmarkBestGPUSet(b *testing.B) {
	for _, c := range []struct{ gpus, want int }{{8, 1}, {8, 4}, {8, 8}, {16, 4}, {16, 8}} {
		nd := gpuNode("g", c.gpus)
		free := make([]int, c.gpus)
		for i := range free {
			free[i] = i
		}
		b.Run(fmt.Sprintf("%dof%d", c.want, c.gpus), func(b *testing.B) {
			for b.Loop() {
				if s := bestGPUSet(nd.GPUs, free, c.want); len(s) != c.want {
					b.Fatal(s)
				}
			}
		})
	}
}

// BenchmarkPlanGPUs is one plan placing 400 GPU jobs (1, 2, 4 or 8 GPUs)
// on 100 8-GPU nodes, against the same plan without GPU devices (the
// count only), which is what the exact pick adds.
func BenchmarkPlanGPUs(b *testing.B) {
	for _, devices := range []bool{false, true} {
		var nodes []fsm.Node
		for i := range 100 {
			nd := gpuNode(fmt.Sprintf("g%03d", i), 8)
			if !devices {
				nd.GPUs = nil
			}
			nodes = append(nodes, nd)
		}
		var jobs []*fsm.Job
		for i := range 400 {
			j := gpuJob(fmt.Sprintf("j%04d", i), []int{1, 2, 4, 8}[i%4])
			jobs = append(jobs, j)
		}
		b.Run(fmt.Sprintf("devices=%v", devices), func(b *testing.B) {
			placed := 0
			for b.Loop() {
				d := Plan(&Snapshot{Nodes: nodes, Pending: jobs}, t0, testConfig())
				placed = d.Stats.Placed
			}
			b.ReportMetric(float64(placed), "placed")
		})
	}
}

// BenchmarkPlanGPUShares is one plan placing 800 share jobs (5 to 40 GiB)
// on 100 8-GPU nodes of 80 GiB devices, held back and placed largest
// first, against 800 1-GPU jobs on the same nodes.
func BenchmarkPlanGPUShares(b *testing.B) {
	var nodes []fsm.Node
	for i := range 100 {
		nodes = append(nodes, gpuNode(fmt.Sprintf("g%03d", i), 8))
	}
	for _, shares := range []bool{false, true} {
		var jobs []*fsm.Job
		for i := range 800 {
			j := gpuJob(fmt.Sprintf("j%04d", i), 1)
			if shares {
				j.Spec.Resources.Named = nil
				j.Spec.Resources.GPUMemoryMiB = int64([]int{5, 10, 20, 40}[i%4]) * 1024
			}
			jobs = append(jobs, j)
		}
		b.Run(fmt.Sprintf("shares=%v", shares), func(b *testing.B) {
			placed := 0
			for b.Loop() {
				d := Plan(&Snapshot{Nodes: nodes, Pending: jobs}, t0, testConfig())
				placed = d.Stats.Placed
			}
			b.ReportMetric(float64(placed), "placed")
		})
	}
}
