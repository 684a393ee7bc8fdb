package sched

import (
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
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{Nodes: tc.nodes, Pending: []*fsm.Job{tc.job}, Running: map[string]int{}}
			d := decode(t, Plan(s, t0, testConfig()))
			got, placed := d.placedOn()[tc.job.ID]
			if len(tc.on) == 0 {
				if placed {
					t.Fatalf("placed on %s, want unplaced", got)
				}
				if d.reasons[tc.job.ID] != tc.why {
					t.Fatalf("reason %q, want %q", d.reasons[tc.job.ID], tc.why)
				}
				return
			}
			ok := false
			for _, n := range tc.on {
				ok = ok || n == got
			}
			if !ok {
				t.Fatalf("placed on %q (reason %q), want one of %v", got, d.reasons[tc.job.ID], tc.on)
			}
		})
	}
}
