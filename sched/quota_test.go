package sched

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

func nsJob(id, ns string, cpu, mem int64) *fsm.Job {
	j := job(id, 50, cpu, mem)
	j.Spec.Namespace = ns
	return j
}

func TestPlanNamespaceQuota(t *testing.T) {
	big := []fsm.Node{node("a", 16000, 65536), node("b", 16000, 65536)}
	tests := []struct {
		name       string
		quota      fsm.Namespace
		usage      NamespaceUsage
		placing    []Placing
		jobs       []*fsm.Job
		wantPlaced []string
		wantReason map[string]string
	}{
		{
			name:       "max_running",
			quota:      fsm.Namespace{Name: "t", MaxRunning: 2},
			jobs:       []*fsm.Job{nsJob("j1", "t", 100, 64), nsJob("j2", "t", 100, 64), nsJob("j3", "t", 100, 64), nsJob("d1", "", 100, 64)},
			wantPlaced: []string{"j1", "j2", "d1"},
			wantReason: map[string]string{"j3": "namespace t at max_running 2"},
		},
		{
			name:       "running counts live work",
			quota:      fsm.Namespace{Name: "t", MaxRunning: 2},
			usage:      NamespaceUsage{Running: 1, CPU: 100, MemoryMB: 64},
			jobs:       []*fsm.Job{nsJob("j1", "t", 100, 64), nsJob("j2", "t", 100, 64)},
			wantPlaced: []string{"j1"},
			wantReason: map[string]string{"j2": "namespace t at max_running 2"},
		},
		{
			name:       "placements in flight count",
			quota:      fsm.Namespace{Name: "t", MaxCPU: 1000},
			placing:    []Placing{{Placement: fsm.Placement{JobID: "p", Node: "a", Resources: fsm.Resources{CPU: 600, MemoryMB: 64}}, Namespace: "t"}},
			jobs:       []*fsm.Job{nsJob("j1", "t", 500, 64), nsJob("j2", "t", 400, 64)},
			wantPlaced: []string{"j2"},
			wantReason: map[string]string{"j1": "namespace t over cpu quota 1000m"},
		},
		{
			name:       "memory, smaller shape still fits",
			quota:      fsm.Namespace{Name: "t", MaxMemoryMB: 1024},
			jobs:       []*fsm.Job{nsJob("j1", "t", 100, 768), nsJob("j2", "t", 100, 512), nsJob("j3", "t", 100, 256)},
			wantPlaced: []string{"j1", "j3"},
			wantReason: map[string]string{"j2": "namespace t over memory quota 1024MiB"},
		},
		{
			name:       "default request counts against cpu",
			quota:      fsm.Namespace{Name: "t", MaxCPU: 250},
			jobs:       []*fsm.Job{nsJob("j1", "t", 0, 0), nsJob("j2", "t", 0, 0), nsJob("j3", "t", 0, 0)},
			wantPlaced: []string{"j1", "j2"},
			wantReason: map[string]string{"j3": "namespace t over cpu quota 250m"},
		},
		{
			name:  "gang checked whole",
			quota: fsm.Namespace{Name: "t", MaxCPU: 3000},
			jobs: func() []*fsm.Job {
				g := gangJob("g", 60, 4, 1000, 64)
				g.Spec.Namespace = "t"
				return []*fsm.Job{g, nsJob("j1", "t", 1000, 64)}
			}(),
			wantPlaced: []string{"j1"},
			wantReason: map[string]string{"g": "namespace t over cpu quota 3000m"},
		},
		{
			name:       "default namespace quota",
			quota:      fsm.Namespace{Name: "default", MaxRunning: 1},
			jobs:       []*fsm.Job{nsJob("d1", "", 100, 64), nsJob("d2", "", 100, 64), nsJob("t1", "t", 100, 64)},
			wantPlaced: []string{"d1", "t1"},
			wantReason: map[string]string{"d2": "namespace default at max_running 1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, j := range tc.jobs {
				j.SubmittedAt = t0.Add(time.Duration(i) * time.Second)
			}
			q := tc.quota
			ns := fsm.StoredNamespace(q.Name)
			s := &Snapshot{Nodes: big, Pending: tc.jobs, Placing: tc.placing, Running: map[string]int{},
				NamespaceQuotas: map[string]*fsm.Namespace{ns: &q},
				NamespaceUsage:  map[string]NamespaceUsage{ns: tc.usage}}
			d := decode(t, Plan(s, t0, testConfig()))
			on := d.placedOn()
			var placed []string
			for _, j := range tc.jobs {
				if _, ok := on[j.ID]; ok {
					placed = append(placed, j.ID)
				}
			}
			if fmt.Sprint(placed) != fmt.Sprint(tc.wantPlaced) {
				t.Errorf("placed %v, want %v (reasons %v)", placed, tc.wantPlaced, d.reasons)
			}
			for id, want := range tc.wantReason {
				if d.reasons[id] != want {
					t.Errorf("reason of %s = %q, want %q", id, d.reasons[id], want)
				}
			}
			if s.NamespaceUsage[ns] != tc.usage {
				t.Errorf("Plan modified the snapshot's usage")
			}
		})
	}
}

// Property: over random clusters, namespaces, quotas, gangs and rounds of
// finishes, no plan puts a namespace over any of its limits, no gang is
// placed partly, and a job left queued for its quota would indeed go over.
func TestPropertyNamespaceQuotaNeverExceeded(t *testing.T) {
	cfg := testConfig()
	namespaces := []string{"", "a", "b", "c"}
	for seed := int64(1); seed <= 60; seed++ {
		rng := newRand(seed)
		s := randomSnapshot(rng, 2+rng.Intn(8), 20+rng.Intn(100))
		s.Live = nil // every live attempt below belongs to a known job and namespace
		s.NamespaceQuotas = map[string]*fsm.Namespace{}
		for _, ns := range namespaces {
			if rng.Intn(4) == 0 {
				continue // no quota
			}
			q := &fsm.Namespace{Name: fsm.NamespaceOf(ns)}
			switch rng.Intn(3) {
			case 0:
				q.MaxRunning = 1 + rng.Intn(6)
			case 1:
				q.MaxCPU = int64(500 * (1 + rng.Intn(20)))
			default:
				q.MaxMemoryMB = int64(512 * (1 + rng.Intn(20)))
				q.MaxRunning = 1 + rng.Intn(10)
			}
			s.NamespaceQuotas[ns] = q
		}
		specs := map[string]*fsm.JobSpec{}
		for i, j := range s.Pending {
			j.Spec.Namespace = namespaces[rng.Intn(len(namespaces))]
			j.Spec.Constraints = nil
			if i%7 == 0 {
				j.Spec.Gang = &fsm.GangSpec{Size: 2 + rng.Intn(3)}
				j.Spec.Resources.Named = nil
			}
			specs[j.ID] = &j.Spec
		}
		for round := range 6 {
			s.NamespaceUsage = usageOf(s, specs)
			dec := Plan(s, t0.Add(time.Duration(round)*time.Second), cfg)
			d := decode(t, dec)
			after := usageOf(s, specs)
			for _, p := range d.placements {
				sp := specs[p.JobID]
				tasks := 1
				if sp.Gang != nil {
					tasks = sp.Gang.Size
					if len(p.Tasks) != tasks {
						t.Fatalf("seed %d: gang %s placed with %d of %d tasks", seed, p.JobID, len(p.Tasks), tasks)
					}
				}
				u := after[sp.Namespace]
				u.add(&p.Resources, tasks)
				after[sp.Namespace] = u
			}
			for ns, q := range s.NamespaceQuotas {
				u := after[ns]
				if (q.MaxRunning > 0 && u.Running > q.MaxRunning) || (q.MaxCPU > 0 && u.CPU > q.MaxCPU) || (q.MaxMemoryMB > 0 && u.MemoryMB > q.MaxMemoryMB) {
					t.Fatalf("seed %d round %d: namespace %q over quota %+v: %+v", seed, round, ns, *q, u)
				}
			}
			for id, r := range d.reasons {
				if !strings.HasPrefix(r, "namespace ") {
					continue
				}
				sp := specs[id]
				q := s.NamespaceQuotas[sp.Namespace]
				if q == nil {
					t.Fatalf("seed %d: %s held by %q without a quota", seed, id, r)
				}
				req := cfg.request(&sp.Resources)
				tasks := 1
				if sp.Gang != nil {
					tasks = sp.Gang.Size
				}
				u := after[sp.Namespace]
				over := (q.MaxRunning > 0 && u.Running+1 > q.MaxRunning) ||
					(q.MaxCPU > 0 && u.CPU+req.CPU*int64(tasks) > q.MaxCPU) ||
					(q.MaxMemoryMB > 0 && u.MemoryMB+req.MemoryMB*int64(tasks) > q.MaxMemoryMB)
				if !over {
					t.Fatalf("seed %d round %d: %s held by %q but fits its quota (%+v, usage %+v)", seed, round, id, r, *q, u)
				}
			}
			applyPlan(t, s, dec)
			for _, p := range d.placements { // applyPlan adds one attempt per placement: a gang holds one per task
				for i := 1; i < len(p.Tasks); i++ {
					s.Live = append(s.Live, fsm.Attempt{JobID: p.JobID, Num: 1 + i, Node: p.Tasks[i].Node, State: fsm.AttemptAssigned, Resources: p.Resources})
				}
			}
			// Finish a random share of the live attempts (a gang's tasks together).
			var keep []fsm.Attempt
			done := map[string]bool{}
			for _, a := range s.Live {
				if _, seen := done[a.JobID]; !seen {
					done[a.JobID] = rng.Intn(3) == 0
				}
				if !done[a.JobID] {
					keep = append(keep, a)
				}
			}
			s.Live = keep
			s.Running = map[string]int{}
		}
	}
}

// usageOf is NamespaceUsage recomputed from the snapshot's live attempts,
// the way LoadSnapshot computes it.
func usageOf(s *Snapshot, specs map[string]*fsm.JobSpec) map[string]NamespaceUsage {
	out := map[string]NamespaceUsage{}
	seen := map[string]bool{}
	for _, a := range s.Live {
		ns := specs[a.JobID].Namespace
		u := out[ns]
		if !seen[a.JobID] {
			u.Running++
			seen[a.JobID] = true
		}
		u.CPU += a.Resources.CPU
		u.MemoryMB += a.Resources.MemoryMB
		out[ns] = u
	}
	return out
}
