package sched

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// scaleSnapshot is a homogeneous-ish cluster with a few label classes and
// a deep queue of small jobs of a few shapes, like a busy batch cluster.
func scaleSnapshot(rng *rand.Rand, nNodes, nJobs int) *Snapshot {
	s := &Snapshot{Running: map[string]int{}, LeaderSince: t0.Add(-time.Hour)}
	for i := range nNodes {
		n := node(fmt.Sprintf("n%05d", i), 32000, 128*1024, "zone", zones[i%len(zones)])
		if i%10 == 0 {
			n.Labels["gpu_model"] = gpuModels[i%len(gpuModels)]
			n.Capacity.Named = map[string]int64{"gpu": 8}
		}
		s.Nodes = append(s.Nodes, n)
	}
	cpus := []int64{250, 500, 1000, 2000}
	mems := []int64{256, 512, 1024, 4096}
	for i := range nJobs {
		j := job(fmt.Sprintf("j%07d", i), rng.Intn(101), cpus[rng.Intn(len(cpus))], mems[rng.Intn(len(mems))])
		j.SubmittedAt = t0.Add(-time.Duration(rng.Intn(600)) * time.Second)
		switch rng.Intn(20) {
		case 0:
			j.Spec.Constraints = []string{"zone == a"}
		case 1:
			j.Spec.Constraints = []string{"has gpu_model"}
			j.Spec.Resources.Named = map[string]int64{"gpu": 1}
		case 2:
			j.Spec.Placement = "spread"
		}
		s.Pending = append(s.Pending, j)
	}
	return s
}

// TestPlanScale plans 100,000 queued jobs on 5,000 nodes in one call and
// checks the invariants on the result. -short uses a tenth of the size.
func TestPlanScale(t *testing.T) {
	nNodes, nJobs := 5000, 100000
	if testing.Short() {
		nNodes, nJobs = 500, 10000
	}
	s := scaleSnapshot(newRand(1), nNodes, nJobs)
	cfg := testConfig()
	start := time.Now()
	dec := Plan(s, t0, cfg)
	el := time.Since(start)
	t.Logf("%d nodes, %d jobs: placed %d, unplaced %d, %d commands in %v (%.0f placements/s)",
		nNodes, nJobs, dec.Stats.Placed, dec.Stats.Unplaced, len(dec.Commands), el, float64(dec.Stats.Placed)/el.Seconds())
	if dec.Stats.Placed+dec.Stats.Unplaced != nJobs {
		t.Fatalf("placed+unplaced = %d, want %d", dec.Stats.Placed+dec.Stats.Unplaced, nJobs)
	}
	checkInvariants(t, s, dec, cfg)
}

// BenchmarkPlan5000Nodes100kJobs measures a whole plan (ordering,
// placement, command encoding) on a 5,000-node cluster with 100,000 jobs.
func BenchmarkPlan5000Nodes100kJobs(b *testing.B) {
	s := scaleSnapshot(newRand(1), 5000, 100000)
	cfg := testConfig()
	placed := 0
	b.ResetTimer()
	for b.Loop() {
		placed += Plan(s, t0, cfg).Stats.Placed
	}
	b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
}

// BenchmarkPlaceOnly isolates the placer (no ordering, no encoding).
func BenchmarkPlaceOnly5000Nodes(b *testing.B) {
	s := scaleSnapshot(newRand(1), 5000, 100000)
	cfg := testConfig()
	placed := 0
	b.ResetTimer()
	for b.Loop() {
		nodes, _ := newNodeStates(s.Nodes, nil)
		p := newPlacer(nodes, nil, cfg.MinCandidates)
		for _, j := range s.Pending {
			req := cfg.request(&j.Spec.Resources)
			if ni, _, _ := p.place(&j.Spec, &req); ni >= 0 {
				placed++
			}
		}
	}
	b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
	_ = fsm.CmdPlace
}

// BenchmarkPlanNothingDue5000Nodes is a plan with nothing to place on
// 5,000 nodes, as the leader makes after each batch of delayed submits:
// its cost is the per-node work alone (issue 23), with the node index
// built by the plan (fresh) or kept from the previous plan (reused).
func BenchmarkPlanNothingDue5000Nodes(b *testing.B) {
	s := scaleSnapshot(newRand(1), 5000, 0)
	cfg := testConfig()
	for _, reuse := range []bool{false, true} {
		name := "fresh"
		if reuse {
			name = "reused"
		}
		b.Run(name, func(b *testing.B) {
			var nc nodeIndexCache
			for b.Loop() {
				s.NodeIndex = nil
				if reuse {
					s.NodeIndex = nc.get(s.Nodes)
				}
				if dec := Plan(s, t0, cfg); len(dec.Commands) != 0 {
					b.Fatalf("a plan with nothing due made %d commands", len(dec.Commands))
				}
			}
		})
	}
}
