package sched

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }

var (
	zones       = []string{"a", "b", "c"}
	gpuModels   = []string{"a100", "h100", "v100"}
	constraintz = []string{"zone == a", "zone != b", "gpu_model in (a100,h100)", "has gpu_model", "not_has spot", "arch not_in (arm64)"}
)

// randomSnapshot builds a cluster with a mix of node shapes, labels,
// states and live attempts, and a queue of jobs of many shapes.
func randomSnapshot(rng *rand.Rand, nNodes, nJobs int) *Snapshot {
	s := &Snapshot{QueueLimits: map[string]int{"q1": 1 + rng.Intn(5)}, Running: map[string]int{}, LeaderSince: t0.Add(-time.Hour)}
	for i := range nNodes {
		n := node(fmt.Sprintf("n%04d", i), int64(1000*(1+rng.Intn(16))), int64(1024*(1+rng.Intn(32))),
			"zone", zones[rng.Intn(len(zones))])
		if rng.Intn(4) == 0 {
			n.Labels["gpu_model"] = gpuModels[rng.Intn(len(gpuModels))]
			n.Capacity.Named = map[string]int64{"gpu": int64(1 + rng.Intn(4))}
		}
		if rng.Intn(5) == 0 {
			n.Labels["arch"] = "arm64"
		}
		if rng.Intn(8) == 0 {
			n.Labels["spot"] = "true"
		}
		switch rng.Intn(20) {
		case 0:
			n.Gossip = fsm.NodeSuspect
		case 1:
			n.Eligibility = fsm.Ineligible
		case 2:
			n.Drivers = []string{"process"}
		case 3:
			if s.Behind == nil {
				s.Behind = map[string]bool{}
			}
			s.Behind[n.Name] = true
		}
		if rng.Intn(3) == 0 {
			n.Slots = 1 + rng.Intn(6)
		}
		s.Nodes = append(s.Nodes, n)
		// Some pre-existing load.
		for k := 0; k < rng.Intn(3); k++ {
			a := liveAttempt(fmt.Sprintf("live-%d-%d", i, k), n.Name, n.Capacity.CPU/4, n.Capacity.MemoryMB/4, uint64(i*10+k+1))
			s.Live = append(s.Live, a)
		}
	}
	for i := range nJobs {
		j := job(fmt.Sprintf("j%06d", i), rng.Intn(101), int64(250*(1+rng.Intn(16))), int64(256*(1+rng.Intn(40))))
		j.SubmittedAt = t0.Add(-time.Duration(rng.Intn(3600)) * time.Second)
		if rng.Intn(4) == 0 {
			j.Spec.Constraints = []string{constraintz[rng.Intn(len(constraintz))]}
		}
		if rng.Intn(8) == 0 {
			j.Spec.Resources.Named = map[string]int64{"gpu": int64(1 + rng.Intn(2))}
		}
		if rng.Intn(4) == 0 {
			j.Spec.Placement = "spread"
		}
		if rng.Intn(10) == 0 {
			j.Spec.Driver = "container"
		}
		if rng.Intn(10) == 0 {
			j.Spec.Queue = "q1"
		}
		if rng.Intn(6) == 0 { // requests nothing: placed as DefaultRequest
			j.Spec.Resources = fsm.Resources{}
		}
		s.Pending = append(s.Pending, j)
	}
	return s
}

// applyPlan applies a decision to the snapshot the way Apply would:
// placed jobs get live attempts, released jobs become queued, reasons stick.
func applyPlan(t testing.TB, s *Snapshot, dec *Decision) {
	d := decode(t, dec)
	placed := map[string]fsm.Placement{}
	for _, p := range d.placements {
		placed[p.JobID] = p
	}
	rel := map[string]bool{}
	for _, id := range d.released {
		rel[id] = true
	}
	var rest []*fsm.Job
	for _, j := range s.Pending {
		if p, ok := placed[j.ID]; ok {
			s.Live = append(s.Live, fsm.Attempt{JobID: j.ID, Num: 1, Node: p.Node, State: fsm.AttemptAssigned, Resources: p.Resources})
			s.Running[j.Spec.Queue]++
			continue
		}
		if rel[j.ID] {
			j.State = fsm.JobQueued
		}
		if r, ok := d.reasons[j.ID]; ok {
			j.Reason = r
		}
		rest = append(rest, j)
	}
	s.Pending = rest
}

// checkInvariants: no node over capacity, every placement honours static
// feasibility, and no unplaced job (not held by its queue) fits anywhere.
func checkInvariants(t *testing.T, s *Snapshot, dec *Decision, cfg Config) {
	t.Helper()
	d := decode(t, dec)
	nodes, idx := newNodeStates(s.Nodes, s.Live) // the state before the plan
	jobs := map[string]*fsm.Job{}
	for _, j := range s.Pending {
		jobs[j.ID] = j
	}
	for _, p := range d.placements {
		j := jobs[p.JobID]
		ns := &nodes[idx[p.Node]]
		cons, err := fsm.ParseConstraints(j.Spec.Constraints)
		if err != nil {
			t.Fatalf("placed %s with bad constraints", j.ID)
		}
		if r := staticMisfit(ns.node, s.Behind[p.Node], j.Spec.Driver, j.Spec.User, cons, j.Spec.Volumes); r != "" {
			t.Fatalf("placed %s on %s although %s", j.ID, p.Node, r)
		}
		for _, c := range cons {
			if !c.Match(ns.node.Labels) {
				t.Fatalf("placed %s on %s violating %s", j.ID, p.Node, c)
			}
		}
		req := cfg.request(&j.Spec.Resources)
		if p.Resources.CPU != req.CPU || p.Resources.MemoryMB != req.MemoryMB {
			t.Fatalf("placed %s as %+v, want its request with the defaults %+v", j.ID, p.Resources, req)
		}
		if !ns.fits(&req) {
			t.Fatalf("placing %s on %s over-commits it (%s)", j.ID, p.Node, ns.misfit(&req))
		}
		ns.take(&req)
	}
	placed := d.placedOn()
	for _, j := range s.Pending {
		if placed[j.ID] != "" || d.failed[j.ID] != "" {
			continue
		}
		if j.State != fsm.JobQueued && !(j.NextRunAt.IsZero() == false && !t0.Before(j.NextRunAt)) {
			continue
		}
		r := d.reasons[j.ID]
		if r == "" {
			r = j.Reason
		}
		if len(r) > 6 && r[:6] == "queue " {
			continue
		}
		cons, _ := fsm.ParseConstraints(j.Spec.Constraints)
		for i := range nodes {
			req := cfg.request(&j.Spec.Resources)
			if staticMisfit(nodes[i].node, s.Behind[nodes[i].node.Name], j.Spec.Driver, j.Spec.User, cons, j.Spec.Volumes) == "" && nodes[i].fits(&req) {
				t.Fatalf("%s (reason %q) left queued but fits on %s after the plan", j.ID, r, nodes[i].node.Name)
			}
		}
	}
}

func TestPlanPropertyRandomClusters(t *testing.T) {
	cfg := testConfig()
	cfg.AgingInterval = time.Minute
	for seed := int64(1); seed <= 60; seed++ {
		rng := newRand(seed)
		s := randomSnapshot(rng, 1+rng.Intn(60), rng.Intn(400))
		cfg.MinCandidates = 1 + rng.Intn(8)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			checkInvariants(t, s, Plan(s, t0, cfg), cfg)
		})
	}
}

// With identical jobs on identical nodes, the placed set is exactly the
// jobs with the highest effective priority (FIFO among equals).
func TestPlanPropertyPriorityWhenShort(t *testing.T) {
	cfg := testConfig()
	cfg.AgingInterval = time.Minute
	for seed := int64(1); seed <= 40; seed++ {
		rng := newRand(seed)
		var nodes []fsm.Node
		for i := range 1 + rng.Intn(10) {
			nodes = append(nodes, node(fmt.Sprint("n", i), 4000, 4096))
		}
		var jobs []*fsm.Job
		for i := range 10 + rng.Intn(100) {
			j := job(fmt.Sprintf("j%03d", i), rng.Intn(101), 1000, 1024)
			j.SubmittedAt = t0.Add(-time.Duration(rng.Intn(7200)) * time.Second)
			jobs = append(jobs, j)
		}
		d := decode(t, Plan(&Snapshot{Nodes: nodes, Pending: jobs}, t0, cfg))
		slots := 4 * len(nodes)
		cands := make([]candidate, 0, len(jobs))
		for _, j := range jobs {
			cands = append(cands, candidate{job: j, eff: EffectivePriority(j, t0, cfg)})
		}
		sortCandidates(cands)
		placed := d.placedOn()
		if len(placed) != min(slots, len(jobs)) {
			t.Fatalf("seed %d: placed %d, want %d", seed, len(placed), min(slots, len(jobs)))
		}
		for i, c := range cands {
			if (i < slots) != (placed[c.job.ID] != "") {
				t.Fatalf("seed %d: job %s (rank %d, eff %d) placed=%v with %d slots", seed, c.job.ID, i, c.eff, placed[c.job.ID] != "", slots)
			}
		}
	}
}

// Repeated plans with attempts finishing in between place every job that
// fits some node's total capacity; the others keep a reason.
func TestPlanPropertyEventuallyPlaced(t *testing.T) {
	cfg := testConfig()
	for seed := int64(1); seed <= 20; seed++ {
		rng := newRand(seed)
		s := randomSnapshot(rng, 1+rng.Intn(20), rng.Intn(300))
		s.Live = nil
		s.QueueLimits = nil
		feasible := map[string]bool{}
		empty, _ := newNodeStates(s.Nodes, nil)
		for _, j := range s.Pending {
			cons, _ := fsm.ParseConstraints(j.Spec.Constraints)
			for i := range empty {
				req := cfg.request(&j.Spec.Resources)
				if staticMisfit(empty[i].node, s.Behind[empty[i].node.Name], j.Spec.Driver, j.Spec.User, cons, j.Spec.Volumes) == "" && empty[i].fits(&req) {
					feasible[j.ID] = true
				}
			}
		}
		rounds := len(s.Pending) + 1
		for range rounds {
			dec := Plan(s, t0, cfg)
			checkInvariants(t, s, dec, cfg)
			applyPlan(t, s, dec)
			s.Live = nil // everything finishes before the next plan
			s.Running = map[string]int{}
		}
		for _, j := range s.Pending {
			if feasible[j.ID] {
				t.Fatalf("seed %d: feasible job %s never placed (reason %q)", seed, j.ID, j.Reason)
			}
			if j.Reason == "" {
				t.Fatalf("seed %d: unplaceable job %s has no reason", seed, j.ID)
			}
		}
	}
}
