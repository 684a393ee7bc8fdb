package sched

import (
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// TestLoopPlacesReleasedChild: a parent's finish releases its child in
// the same entry (fsm), and the wake-up that finish causes places the
// child: no release command, no timer.
func TestLoopPlacesReleasedChild(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)})
	cfg := loopConfig()
	s, stop := e.start(cfg)
	defer stop()
	eventually(t, "first plan", func() bool { return s.Plans() >= 1 })
	e.apply(fsm.CmdSubmitWorkflow, &fsm.SubmitWorkflow{ID: "W", Name: "w", Jobs: []fsm.NewJob{
		{ID: "p", Spec: fsm.JobSpec{Name: "p", Command: []string{"true"}, MaxAttempts: 1}},
		{ID: "c", Spec: fsm.JobSpec{Name: "c", Command: []string{"true"}, MaxAttempts: 1, DependsOn: []string{"p"}}},
	}})
	a := e.waitPlaced("p", 1)
	if j := e.job("c"); j.State != fsm.JobWaiting {
		t.Fatalf("child %s while its parent runs", j.State)
	}
	e.clk.Advance(time.Second) // past any coalescing window; no timer is due
	code := 0
	e.apply(fsm.CmdReport, &fsm.ReportAttempt{JobID: "p", Attempt: a.Num, FencingToken: a.FencingToken, Node: "n1",
		State: fsm.AttemptSucceeded, ExitCode: &code})
	e.waitPlaced("c", 1)
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	for _, c := range e.r.log {
		if c.Type == fsm.CmdRelease {
			t.Fatalf("the scheduler issued %s; the release belongs to the parent's finish", c.Type)
		}
	}
}
