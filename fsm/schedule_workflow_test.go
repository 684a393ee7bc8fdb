package fsm

import (
	"strings"
	"testing"
	"time"
)

func TestIDPlus(t *testing.T) {
	for _, tc := range []struct {
		id   string
		k    int
		want string
	}{
		{"01ARZ3NDEKTSV4RRFFQ69G5FAV", 1, "01ARZ3NDEKTSV4RRFFQ69G5FAW"},
		{"01ARZ3NDEKTSV4RRFFQ69G5FAZ", 1, "01ARZ3NDEKTSV4RRFFQ69G5FB0"},
		{"01ARZ3NDEKTSV4RRFFQ69G5FAV", 0, "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"7ZZZZZZZZZZZZZZZZZZZZZZZZZ", 1, ""},
		{"short", 1, ""},
		{"01ARZ3NDEKTSV4RRFFQ69G5FAU", 1, ""}, // U is not Crockford
	} {
		got, ok := idPlus(tc.id, tc.k)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("idPlus(%s, %d) = %q %v, want %q", tc.id, tc.k, got, ok, tc.want)
		}
	}
}

func workflowScheduleSpec(name string, overlap OverlapPolicy) ScheduleSpec {
	sp := testScheduleSpec(name)
	sp.Job = JobSpec{}
	sp.Overlap = overlap
	sp.Workflow = &WorkflowTemplate{Name: "nightly", Jobs: []JobSpec{
		{Name: "extract", Command: []string{"true"}},
		{Name: "load", Command: []string{"true"}, DependsOn: []string{"extract"}},
	}}
	return sp
}

// TestScheduleFiresWorkflow: a schedule with a workflow template fires one
// workflow per tick, with IDs derived from the fire's, parents resolved,
// the schedule's environment on every job, and overlap applied to the
// last workflow (forbid skips, replace cancels it).
func TestScheduleFiresWorkflow(t *testing.T) {
	h := newHarness(t)
	h.must(CmdPutSchedule, PutSchedule{Schedule: workflowScheduleSpec("wf", OverlapForbid), Create: true})
	const id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	tick := t0.Add(10 * time.Second)
	h.now = tick.Add(time.Millisecond)
	if r := h.must(CmdFireSchedules, fireOf("wf", tick, id)); len(r.Skipped) != 0 {
		t.Fatalf("fire skipped: %v", r.Skipped)
	}
	var w *Workflow
	if err := h.f.View(func(tx *Tx) (err error) { w, err = tx.Workflow(id); return err }); err != nil {
		t.Fatal(err)
	}
	if w.Name != "nightly" || w.Jobs != 2 {
		t.Fatalf("workflow %+v", w)
	}
	extract, load := h.job("01ARZ3NDEKTSV4RRFFQ69G5FAW"), h.job("01ARZ3NDEKTSV4RRFFQ69G5FAX")
	if extract.Spec.Name != "extract" || extract.State != JobQueued || load.State != JobWaiting ||
		len(load.Spec.DependsOn) != 1 || load.Spec.DependsOn[0] != extract.ID ||
		load.Spec.Env[EnvSchedule] != "wf" || !load.Spec.ScheduledAt.Equal(tick) {
		t.Fatalf("jobs: %+v\n%+v", extract, load)
	}
	s := h.schedule("wf")
	if s.LastJob != id || s.Fired != 1 || len(s.History) != 1 || !s.History[0].Workflow || s.History[0].JobID != id {
		t.Fatalf("schedule after the fire: %+v", s)
	}
	// forbid: the workflow is still running, so the next tick is skipped.
	tick2 := tick.Add(10 * time.Second)
	h.now = tick2.Add(time.Millisecond)
	h.must(CmdFireSchedules, fireOf("wf", tick2, "01ARZ3NDEKTSV4RRFFQ69G5FB5"))
	if s := h.schedule("wf"); s.Skipped != 1 || !strings.Contains(s.History[1].Skipped, "overlap forbid: workflow") {
		t.Fatalf("forbid: %+v", s.History)
	}
	// replace: the running workflow is cancelled and a new one fired.
	h.must(CmdPutSchedule, PutSchedule{Schedule: workflowScheduleSpec("wf", OverlapReplace)})
	tick3 := h.now.Add(10 * time.Second).Truncate(10 * time.Second)
	h.now = tick3.Add(time.Millisecond)
	const id3 = "01ARZ3NDEKTSV4RRFFQ69G5FC0"
	if r := h.must(CmdFireSchedules, fireOf("wf", tick3, id3)); len(r.Skipped) != 0 {
		t.Fatalf("replace fire skipped: %v", r.Skipped)
	}
	if j := h.job("01ARZ3NDEKTSV4RRFFQ69G5FAX"); j.State != JobCancelled {
		t.Errorf("the replaced workflow's load job is %s", j.State)
	}
	if j := h.job("01ARZ3NDEKTSV4RRFFQ69G5FC1"); j.State != JobQueued {
		t.Errorf("the new workflow's extract job is %s", j.State)
	}
	// A fire whose IDs are taken is skipped, writing nothing.
	tick4 := tick3.Add(10 * time.Second)
	h.now = tick4.Add(time.Millisecond)
	if r := h.must(CmdFireSchedules, fireOf("wf", tick4, "01ARZ3NDEKTSV4RRFFQ69G5FBZ")); len(r.Skipped) != 1 {
		t.Fatalf("fire over existing IDs: %v", r.Skipped) // its jobs' IDs run into id3's
	}
	checkIndexes(t, h.f)
}

func TestScheduleWorkflowTemplateRefused(t *testing.T) {
	h := newHarness(t)
	for name, f := range map[string]func(*WorkflowTemplate){
		"empty":     func(w *WorkflowTemplate) { w.Jobs = nil },
		"dup name":  func(w *WorkflowTemplate) { w.Jobs[1].Name = "extract" },
		"bad name":  func(w *WorkflowTemplate) { w.Jobs[0].Name = "a/b" },
		"unknown":   func(w *WorkflowTemplate) { w.Jobs[1].DependsOn = []string{"nope"} },
		"self":      func(w *WorkflowTemplate) { w.Jobs[1].DependsOn = []string{"load"} },
		"cycle":     func(w *WorkflowTemplate) { w.Jobs[0].DependsOn = []string{"load"} },
		"too large": func(w *WorkflowTemplate) { w.Jobs = make([]JobSpec, MaxScheduleWorkflowJobs+1) },
	} {
		sp := workflowScheduleSpec("bad", OverlapAllow)
		f(sp.Workflow)
		if r := h.apply(CmdPutSchedule, PutSchedule{Schedule: sp, Create: true}); r.Err == nil {
			t.Errorf("%s: applied", name)
		} else if name == "cycle" && !strings.Contains(r.Err.Error(), "extract -> load -> extract") && !strings.Contains(r.Err.Error(), "load -> extract -> load") {
			t.Errorf("cycle: %v", r.Err)
		}
	}
}
