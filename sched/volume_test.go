package sched

import (
	"slices"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// A job asking for host volumes lands only on nodes that declare them all;
// with none, it stays unplaced and says which volume is missing.
func TestPlanHostVolumes(t *testing.T) {
	both := node("a-both", 1000, 1024)
	both.Volumes = []fsm.HostVolume{{Name: "data", Path: "/mnt/data"}, {Name: "models", Path: "/mnt/models", ReadOnly: true}}
	data := node("b-data", 8000, 8192)
	data.Volumes = []fsm.HostVolume{{Name: "data", Path: "/srv/data"}}
	bare := node("c-bare", 8000, 8192)
	vols := func(id string, names ...string) *fsm.Job {
		j := job(id, 50, 100, 64)
		for _, n := range names {
			j.Spec.Volumes = append(j.Spec.Volumes, fsm.VolumeMount{Name: n, Dest: "/" + n})
		}
		return j
	}
	tests := []struct {
		name  string
		nodes []fsm.Node
		job   *fsm.Job
		on    []string // acceptable nodes; empty: unplaced
		why   string
	}{
		{"one volume: the nodes that have it", []fsm.Node{bare, data, both}, vols("d", "data"), []string{"b-data", "a-both"}, ""},
		{"two volumes: only the node with both", []fsm.Node{bare, data, both}, vols("dm", "data", "models"), []string{"a-both"}, ""},
		{"no volume asked: any node", []fsm.Node{bare}, vols("n"), []string{"c-bare"}, ""},
		{"nobody has it", []fsm.Node{bare, data}, vols("x", "scratch"), nil, "2 nodes: 2 no volume scratch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkPlacedOn(t, tc.nodes, tc.job, tc.on, tc.why) })
	}
}

// checkPlacedOn plans job alone on nodes: it must land on one of on, or
// with on empty stay unplaced with the reason why.
func checkPlacedOn(t *testing.T, nodes []fsm.Node, job *fsm.Job, on []string, why string) {
	t.Helper()
	s := &Snapshot{Nodes: nodes, Pending: []*fsm.Job{job}, Running: map[string]int{}}
	d := decode(t, Plan(s, t0, testConfig()))
	got, placed := d.placedOn()[job.ID]
	if len(on) == 0 {
		if placed {
			t.Fatalf("placed on %s, want unplaced", got)
		}
		if d.reasons[job.ID] != why {
			t.Fatalf("reason %q, want %q", d.reasons[job.ID], why)
		}
		return
	}
	if !slices.Contains(on, got) {
		t.Fatalf("placed on %q (reason %q), want one of %v", got, d.reasons[job.ID], on)
	}
}
