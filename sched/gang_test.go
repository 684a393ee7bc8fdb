package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

func gangJob(id string, prio, size int, cpu, mem int64) *fsm.Job {
	j := job(id, prio, cpu, mem)
	j.Spec.Gang = &fsm.GangSpec{Size: size}
	return j
}

func TestPlanGangSpreadsTasks(t *testing.T) {
	s := &Snapshot{Nodes: []fsm.Node{node("a", 4000, 4096), node("b", 4000, 4096), node("c", 4000, 4096)},
		Pending: []*fsm.Job{gangJob("g", 50, 3, 1000, 1024)}}
	d := decode(t, Plan(s, t0, testConfig()))
	if len(d.placements) != 1 {
		t.Fatalf("placements %+v, want one for the whole gang", d.placements)
	}
	p := d.placements[0]
	nodes := map[string]bool{}
	for _, ts := range p.Tasks {
		nodes[ts.Node] = true
		if ts.Port != fsm.GangPortBase {
			t.Fatalf("task on %s got port %d, want the first of the range", ts.Node, ts.Port)
		}
	}
	if len(p.Tasks) != 3 || len(nodes) != 3 || p.Node != p.Tasks[0].Node {
		t.Fatalf("gang placement %+v: want 3 tasks on 3 nodes", p)
	}
}

func TestPlanGangNeverPartial(t *testing.T) {
	// Two nodes with room: a gang of 3 places nothing, keeps the room for
	// the small job behind it and says why.
	s := &Snapshot{Nodes: []fsm.Node{node("a", 4000, 4096), node("b", 4000, 4096), node("c", 4000, 4096)},
		Live:    []fsm.Attempt{liveAttempt("busy", "c", 4000, 4096, 1)},
		Pending: []*fsm.Job{gangJob("g", 90, 3, 3000, 1024), job("small", 10, 4000, 1024)}}
	d := decode(t, Plan(s, t0, testConfig()))
	for _, p := range d.placements {
		if p.JobID == "g" {
			t.Fatalf("gang placed with one node short: %+v", p)
		}
	}
	if !strings.Contains(d.reasons["g"], "gang of 3: only 2 tasks fit") {
		t.Fatalf("reason %q", d.reasons["g"])
	}
	if d.placedOn()["small"] == "" {
		t.Fatal("the room a failed gang tried was not given back")
	}
}

func TestPlanGangPacksWhenAllowed(t *testing.T) {
	g := gangJob("g", 50, 3, 1000, 1024)
	no := false
	g.Spec.Gang.Spread = &no
	s := &Snapshot{Nodes: []fsm.Node{node("a", 4000, 4096)}, Pending: []*fsm.Job{g}}
	d := decode(t, Plan(s, t0, testConfig()))
	if len(d.placements) != 1 || len(d.placements[0].Tasks) != 3 {
		t.Fatalf("placements %+v", d.placements)
	}
	ports := map[int]bool{}
	for _, ts := range d.placements[0].Tasks {
		ports[ts.Port] = true
	}
	if len(ports) != 3 {
		t.Fatalf("three tasks on one node share ports: %+v", d.placements[0].Tasks)
	}
}

func TestPlanGangPortsAvoidLiveAndPlacing(t *testing.T) {
	live := liveAttempt("old", "a", 100, 64, 1)
	live.Task = &fsm.GangTask{Index: 0, Size: 2, Port: fsm.GangPortBase}
	s := &Snapshot{Nodes: []fsm.Node{node("a", 4000, 4096), node("b", 4000, 4096)},
		Live: []fsm.Attempt{live},
		Placing: []Placing{{Placement: fsm.Placement{JobID: "p", Node: "b", Resources: fsm.Resources{CPU: 100, MemoryMB: 64},
			Tasks: []fsm.TaskSlot{{Node: "b", Port: fsm.GangPortBase}, {Node: "a", Port: fsm.GangPortBase + 1}}}}},
		Pending: []*fsm.Job{gangJob("g", 50, 2, 100, 64)}}
	d := decode(t, Plan(s, t0, testConfig()))
	if len(d.placements) != 1 {
		t.Fatalf("placements %+v", d.placements)
	}
	for _, ts := range d.placements[0].Tasks {
		want := map[string]int{"a": fsm.GangPortBase + 2, "b": fsm.GangPortBase + 1}[ts.Node]
		if ts.Port != want {
			t.Fatalf("task on %s port %d, want %d", ts.Node, ts.Port, want)
		}
	}
}

// Over random clusters with gangs among the jobs: a gang is placed whole
// (exactly Size tasks, on distinct nodes when spread) or not at all, no
// node is over-committed, ports are unique per node, and an unplaced
// spread gang really has fewer than Size nodes with room after the plan.
func TestPlanGangPropertyRandomClusters(t *testing.T) {
	cfg := testConfig()
	for seed := int64(1); seed <= 80; seed++ {
		rng := newRand(seed)
		s := randomSnapshot(rng, 1+rng.Intn(20), rng.Intn(120))
		for _, j := range s.Pending {
			if rng.Intn(4) == 0 {
				j.Spec.Gang = &fsm.GangSpec{Size: 2 + rng.Intn(6)}
				if rng.Intn(4) == 0 {
					no := false
					j.Spec.Gang.Spread = &no
				}
			}
		}
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			dec := Plan(s, t0, cfg)
			d := decode(t, dec)
			nodes, idx := newNodeStates(s.Nodes, s.Live)
			jobs := map[string]*fsm.Job{}
			for _, j := range s.Pending {
				jobs[j.ID] = j
			}
			ports := newPortBook(s.Live, nil)
			placed := map[string]bool{}
			for _, p := range d.placements {
				j := jobs[p.JobID]
				placed[j.ID] = true
				slots := []fsm.TaskSlot{{Node: p.Node}}
				if j.Spec.Gang != nil {
					if len(p.Tasks) != j.Spec.Gang.Size {
						t.Fatalf("gang %s placed with %d of %d tasks", j.ID, len(p.Tasks), j.Spec.Gang.Size)
					}
					slots = p.Tasks
				} else if len(p.Tasks) > 0 {
					t.Fatalf("job %s is no gang but has tasks", j.ID)
				}
				seen := map[string]bool{}
				for _, ts := range slots {
					if j.Spec.Gang != nil {
						if seen[ts.Node] && j.Spec.Gang.SpreadTasks() {
							t.Fatalf("spread gang %s has two tasks on %s", j.ID, ts.Node)
						}
						if ports.used[ts.Node][ts.Port] || ts.Port == 0 {
							t.Fatalf("gang %s port %d on %s reused", j.ID, ts.Port, ts.Node)
						}
						ports.mark(ts.Node, ts.Port)
					}
					seen[ts.Node] = true
					ns := &nodes[idx[ts.Node]]
					if !ns.fits(&p.Resources) {
						t.Fatalf("placing %s on %s over-commits it (%s)", j.ID, ts.Node, ns.misfit(&p.Resources))
					}
					ns.take(&p.Resources)
				}
			}
			for _, j := range s.Pending {
				if j.Spec.Gang == nil || placed[j.ID] || j.State != fsm.JobQueued || !j.Spec.Gang.SpreadTasks() {
					continue
				}
				if r := d.reasons[j.ID]; strings.HasPrefix(r, "queue ") || (r == "" && strings.HasPrefix(j.Reason, "queue ")) {
					continue
				}
				cons, _ := fsm.ParseConstraints(j.Spec.Constraints)
				req := cfg.request(&j.Spec.Resources)
				room := 0
				for i := range nodes {
					if staticMisfit(nodes[i].node, s.Behind[nodes[i].node.Name], j.Spec.Driver, j.Spec.User, cons, j.Spec.Volumes) == "" && nodes[i].fits(&req) {
						room++
					}
				}
				if room >= j.Spec.Gang.Size {
					t.Fatalf("gang %s of %d left queued (%q) with %d nodes with room after the plan", j.ID, j.Spec.Gang.Size, d.reasons[j.ID], room)
				}
			}
		})
	}
}

// A gang that needs a node still catching up with the log asks for a
// wake: nothing committed would wake the loop when that node is in sync.
func TestPlanGangWaitsForBehindNode(t *testing.T) {
	s := &Snapshot{Nodes: []fsm.Node{node("a", 4000, 4096), node("b", 4000, 4096), node("c", 4000, 4096)},
		Behind:  map[string]bool{"c": true},
		Pending: []*fsm.Job{gangJob("g", 50, 3, 100, 64)}}
	dec := Plan(s, t0, testConfig())
	if d := decode(t, dec); len(d.placements) != 0 {
		t.Fatalf("placed %+v with a node behind", d.placements)
	}
	if !dec.NextWake.Equal(t0.Add(BehindRecheck)) {
		t.Fatalf("next wake %v, want %v", dec.NextWake, t0.Add(BehindRecheck))
	}
}
