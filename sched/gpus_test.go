package sched

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// islands is testdata/gpu/nvlink8's matrix: NVLink inside {0,1,4,5} and
// {2,3,6,7} (not index-contiguous), NODE or SYS across.
var islands = []int{0, 0, 1, 1, 0, 0, 1, 1}

func gpuNode(name string, n int) fsm.Node {
	nd := node(name, 64000, 512000)
	nd.Capacity.Named = map[string]int64{"gpu": int64(n)}
	for i := range n {
		g := fsm.GPU{UUID: fmt.Sprintf("GPU-%s-%d", name, i), Index: i, Minor: i, Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, Compute: "9.0"}
		for j := range n {
			switch {
			case i == j:
				g.Links = append(g.Links, "X")
			case islands[i%8] == islands[j%8]:
				g.Links = append(g.Links, "NV18")
			case i/4 == j/4:
				g.Links = append(g.Links, "NODE")
			default:
				g.Links = append(g.Links, "SYS")
			}
		}
		nd.GPUs = append(nd.GPUs, g)
	}
	return nd
}

func gpuJob(id string, n int) *fsm.Job {
	j := job(id, 50, 1000, 1024)
	j.Spec.Resources.Named = map[string]int64{"gpu": int64(n)}
	return j
}

// indexes maps a placement's UUIDs back to device indexes on nd.
func indexes(nd fsm.Node, uuids []string) []int {
	var out []int
	for _, u := range uuids {
		for _, g := range nd.GPUs {
			if g.UUID == u {
				out = append(out, g.Index)
			}
		}
	}
	return out
}

func TestPlanGPUsDisjointIslands(t *testing.T) {
	nd := gpuNode("g1", 8)
	j1, j2 := gpuJob("j1", 4), gpuJob("j2", 4)
	j2.SubmittedAt = t0.Add(1)
	snap := &Snapshot{Nodes: []fsm.Node{nd}, Pending: []*fsm.Job{j1, j2}}
	d := decode(t, Plan(snap, t0, testConfig()))
	if len(d.placements) != 2 {
		t.Fatalf("placed %d, want 2 (reasons %v)", len(d.placements), d.reasons)
	}
	a, b := indexes(nd, d.placements[0].GPUs), indexes(nd, d.placements[1].GPUs)
	if !slices.Equal(a, []int{0, 1, 4, 5}) || !slices.Equal(b, []int{2, 3, 6, 7}) {
		t.Fatalf("picked %v and %v, want the two NVLink islands [0 1 4 5] and [2 3 6 7]", a, b)
	}
	// The same state plans the same devices (no map order, no randomness).
	for range 5 {
		again := decode(t, Plan(snap, t0, testConfig()))
		if !reflect.DeepEqual(again.placements, d.placements) {
			t.Fatalf("a second plan picked %+v, the first %+v", again.placements, d.placements)
		}
	}
}

func TestPlanGPUsHeldAndFreed(t *testing.T) {
	nd := gpuNode("g1", 8)
	held := liveAttempt("x", "g1", 1000, 1024, 3)
	held.Resources.Named = map[string]int64{"gpu": 2}
	held.GPUs = []fsm.GPU{nd.GPUs[0], nd.GPUs[4]} // part of island A
	j := gpuJob("j1", 4)
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Live: []fsm.Attempt{held}, Pending: []*fsm.Job{j}}, t0, testConfig()))
	if got := indexes(nd, d.placements[0].GPUs); !slices.Equal(got, []int{2, 3, 6, 7}) {
		t.Fatalf("with 0 and 4 held picked %v, want island B [2 3 6 7]", got)
	}
	// A 6-GPU job does not fit while 2 are held: the reason says the gpus are busy.
	big := gpuJob("big", 7)
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Live: []fsm.Attempt{held}, Pending: []*fsm.Job{big}}, t0, testConfig()))
	if len(d.placements) != 0 || d.reasons["big"] != "1 node: 1 insufficient gpu" {
		t.Fatalf("placements %v reason %q", d.placements, d.reasons["big"])
	}
	// Ended (not live): the devices are free again.
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: []*fsm.Job{big}}, t0, testConfig()))
	if len(d.placements) != 1 || len(d.placements[0].GPUs) != 7 {
		t.Fatalf("after the attempt ended: %+v %v", d.placements, d.reasons)
	}
}

func TestPlanGPUsInFlight(t *testing.T) {
	// A placement not yet applied holds its devices for the next plan.
	nd := gpuNode("g1", 8)
	inflight := Placing{Placement: fsm.Placement{JobID: "p", Node: "g1", Resources: fsm.Resources{CPU: 1000, MemoryMB: 1024, Named: map[string]int64{"gpu": 4}},
		GPUs: []string{nd.GPUs[0].UUID, nd.GPUs[1].UUID, nd.GPUs[4].UUID, nd.GPUs[5].UUID}}}
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Placing: []Placing{inflight}, Pending: []*fsm.Job{gpuJob("j1", 4)}}, t0, testConfig()))
	if got := indexes(nd, d.placements[0].GPUs); !slices.Equal(got, []int{2, 3, 6, 7}) {
		t.Fatalf("picked %v, want [2 3 6 7]", got)
	}
}

func TestPlanGPUsUnhealthyAndConstraints(t *testing.T) {
	nd := gpuNode("g1", 8)
	nd.GPUs[2].Health = "xid 79"
	nd.Capacity.Named["gpu"] = 7
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: []*fsm.Job{gpuJob("j1", 4), gpuJob("j2", 3)}}, t0, testConfig()))
	for _, p := range d.placements {
		if slices.Contains(indexes(nd, p.GPUs), 2) {
			t.Fatalf("placed %s on the unhealthy GPU 2: %v", p.JobID, indexes(nd, p.GPUs))
		}
	}
	if len(d.placements) != 2 {
		t.Fatalf("placed %d, want 2: %v", len(d.placements), d.reasons)
	}

	for _, tt := range []struct {
		cons   []string
		n      int
		reason string
	}{
		{[]string{"gpu.memory >= 80GB", "gpu.model == h100"}, 4, ""},
		{[]string{"gpu.memory >= 80GiB"}, 1, "1 node: 1 no GPU matching gpu.memory >= 80GiB"},
		{[]string{"gpu.compute >= 10.0"}, 1, "1 node: 1 no GPU matching gpu.compute >= 10.0"},
		{nil, 100, "no node has 100 GPUs (the most any node has is 7)"},
		{nil, 8, "no node has 8 GPUs (the most any node has is 7)"},
	} {
		j := gpuJob("c", tt.n)
		j.Spec.Constraints = tt.cons
		d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: []*fsm.Job{j}}, t0, testConfig()))
		if tt.reason == "" {
			if len(d.placements) != 1 {
				t.Errorf("%v: not placed: %v", tt.cons, d.reasons)
			}
			continue
		}
		if len(d.placements) != 0 || d.reasons["c"] != tt.reason {
			t.Errorf("%v gpus=%d: placements %v reason %q, want %q", tt.cons, tt.n, d.placements, d.reasons["c"], tt.reason)
		}
	}
}

func TestPlanGPUsTooFewMatching(t *testing.T) {
	// Devices of two kinds on one node: the constraint picks among its kind only.
	nd := gpuNode("g1", 4)
	nd.GPUs[0].MemoryMiB, nd.GPUs[1].MemoryMiB = 40960, 40960
	j := gpuJob("j", 3)
	j.Spec.Constraints = []string{"gpu.memory >= 80GB"}
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: []*fsm.Job{j}}, t0, testConfig()))
	if len(d.placements) != 0 || d.reasons["j"] != "1 node: 1 too few GPUs matching gpu.memory >= 80GB" {
		t.Fatalf("placements %v reason %q", d.placements, d.reasons["j"])
	}
	j.Spec.Resources.Named["gpu"] = 2
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: []*fsm.Job{j}}, t0, testConfig()))
	if len(d.placements) != 1 || !slices.Equal(indexes(nd, d.placements[0].GPUs), []int{2, 3}) {
		t.Fatalf("placements %+v, want GPUs [2 3]", d.placements)
	}
}

func TestPlanGPUsCountOnlyNode(t *testing.T) {
	// --resource gpu=2 on a host without detection: the count, no devices.
	nd := node("old", 4000, 4096)
	nd.Capacity.Named = map[string]int64{"gpu": 2}
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: []*fsm.Job{gpuJob("j", 2)}}, t0, testConfig()))
	if len(d.placements) != 1 || d.placements[0].GPUs != nil {
		t.Fatalf("placements %+v", d.placements)
	}
}

func TestPlanGPUGangFewestNodes(t *testing.T) {
	// Two 8-GPU nodes, a packed gang of two 4-GPU tasks: one node, one island each.
	a, b := gpuNode("a", 8), gpuNode("b", 8)
	j := gpuJob("g", 4)
	no := false
	j.Spec.Gang = &fsm.GangSpec{Size: 2, Spread: &no}
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{a, b}, Pending: []*fsm.Job{j}}, t0, testConfig()))
	if len(d.placements) != 1 || len(d.placements[0].Tasks) != 2 {
		t.Fatalf("placements %+v reasons %v", d.placements, d.reasons)
	}
	t0s, t1s := d.placements[0].Tasks[0], d.placements[0].Tasks[1]
	if t0s.Node != t1s.Node {
		t.Fatalf("tasks on %s and %s, want one node", t0s.Node, t1s.Node)
	}
	if x, y := indexes(a, t0s.GPUs), indexes(a, t1s.GPUs); !slices.Equal(x, []int{0, 1, 4, 5}) || !slices.Equal(y, []int{2, 3, 6, 7}) {
		t.Fatalf("task GPUs %v and %v", x, y)
	}
	// A gang that cannot fit gives back every device it took.
	big := gpuJob("big", 6)
	big.Spec.Gang = &fsm.GangSpec{Size: 3, Spread: &no}
	small := gpuJob("small", 8)
	small.SubmittedAt = t0.Add(1)
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{a, b}, Pending: []*fsm.Job{big, small}}, t0, testConfig()))
	if on := d.placedOn(); on["big"] != "" || on["small"] == "" || !strings.HasPrefix(d.reasons["big"], "gang of 3: only 2 tasks fit") {
		t.Fatalf("placed %v reasons %v", on, d.reasons)
	}
}

func TestBestGPUSetGreedyAgrees(t *testing.T) {
	nd := gpuNode("g", 8)
	free := []int{0, 1, 2, 3, 4, 5, 6, 7}
	pair := func(a, b int) int { return fsm.LinkScore(nd.GPUs[a].Links[b]) }
	for n := 1; n <= 8; n++ {
		ex, gr := bestExhaustive(free, n, pair), bestGreedy(free, n, pair)
		score := func(s []int) int {
			t := 0
			for i := range s {
				for j := i + 1; j < len(s); j++ {
					t += pair(s[i], s[j])
				}
			}
			return t
		}
		if score(ex) != score(gr) {
			t.Errorf("n=%d: exhaustive %v (%d), greedy %v (%d)", n, ex, score(ex), gr, score(gr))
		}
	}
	// 16 devices, 8 wanted: past maxGPUCombos, greedy; still one island's worth of NVLink first.
	big := gpuNode("big", 16)
	all := make([]int, 16)
	for i := range all {
		all[i] = i
	}
	if combinations(16, 8) <= maxGPUCombos {
		t.Fatal("C(16,8) should take the greedy path")
	}
	got := bestGPUSet(big.GPUs, all, 8)
	if !slices.Equal(got, []int{0, 1, 4, 5, 8, 9, 12, 13}) {
		t.Fatalf("16 devices, 8 wanted: %v", got)
	}
}
