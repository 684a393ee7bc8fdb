package sched

import (
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// A job naming a user lands only on nodes whose --job-users allow it.
func TestPlanJobUserAllowList(t *testing.T) {
	strict := node("a-strict", 8000, 8192)
	strict.JobUsers = []string{"nobody"}
	rooty := node("b-root", 1000, 1024)
	rooty.JobUsers = []string{"nobody", "root"}
	any := node("c-any", 8000, 8192)
	any.JobUsers = []string{"*"}
	old := node("d-old", 8000, 8192) // no list advertised: unrestricted

	user := func(id, u string) *fsm.Job {
		j := job(id, 50, 100, 64)
		j.Spec.User = u
		return j
	}
	tests := []struct {
		name  string
		nodes []fsm.Node
		job   *fsm.Job
		on    []string // acceptable nodes; empty: unplaced
		why   string
	}{
		{"root only where allowed", []fsm.Node{strict, rooty}, user("r", "root"), []string{"b-root"}, ""},
		{"uid 0 with a group", []fsm.Node{strict, rooty}, user("r", "root:wheel"), []string{"b-root"}, ""},
		{"star allows anyone", []fsm.Node{strict, any}, user("u", "alice"), []string{"c-any"}, ""},
		{"unlisted node allows anyone", []fsm.Node{strict, old}, user("u", "alice"), []string{"d-old"}, ""},
		{"no node allows", []fsm.Node{strict}, user("u", "alice"), nil, "1 node: 1 user alice not in --job-users"},
		{"no user: any node", []fsm.Node{strict}, user("n", ""), []string{"a-strict"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.why != "" {
				tc.job.Spec.User = "alice:x"
			}
			checkPlacedOn(t, tc.nodes, tc.job, tc.on, tc.why)
		})
	}
}
