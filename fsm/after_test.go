package fsm

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAfter(t *testing.T) {
	for in, want := range map[string]AfterDep{
		"J1":           {Job: "J1", On: AfterOK},
		"J1:ok":        {Job: "J1", On: AfterOK},
		"J1:any":       {Job: "J1", On: AfterAny},
		"J1:failed":    {Job: "J1", On: AfterFailed},
		"J1:cancelled": {Job: "J1", On: AfterCancelled},
	} {
		got, err := ParseAfter(in)
		if err != nil || got != want {
			t.Errorf("ParseAfter(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", ":ok", "J1:", "J1:notok", "J1:OK"} {
		if _, err := ParseAfter(in); err == nil {
			t.Errorf("ParseAfter(%q): no error", in)
		}
	}
}

// submitAfter submits job id depending on parents ("ID:on" each).
func (h *harness) submitAfter(id string, after ...string) *Result {
	h.t.Helper()
	spec := JobSpec{Command: []string{"true"}, MaxAttempts: 1}
	for _, s := range after {
		d, err := ParseAfter(s)
		if err != nil {
			h.t.Fatal(err)
		}
		spec.DependsOn = append(spec.DependsOn, d.Job)
		spec.After = append(spec.After, d)
	}
	return h.apply(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: id, Spec: spec}}})
}

func (h *harness) wantJob(id string, st JobState, reason string) {
	h.t.Helper()
	j := h.job(id)
	if j.State != st || !strings.Contains(j.Reason, reason) {
		h.t.Fatalf("%s: %s (%q), want %s (%q)", id, j.State, j.Reason, st, reason)
	}
}

// Each parent is held to its own requirement, whether it ends before or
// after the child is submitted; one that can no longer be met ends the
// child cancelled with the reason.
func TestAfterRequirements(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submit("A", "X")
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "B", Spec: JobSpec{Command: []string{"true"}, MaxAttempts: 1}}}})

	for id, after := range map[string][]string{
		"ok":       {"A:ok"},
		"any":      {"A:any"},
		"notok":    {"A:failed"},
		"both":     {"A:ok", "X:cancelled"},
		"bothfail": {"A:ok", "X:ok"},
	} {
		if r := h.submitAfter(id, after...); r.Err != nil {
			t.Fatalf("%s: %v", id, r.Err)
		}
		h.wantJob(id, JobWaiting, "")
	}
	h.must(CmdCancelJob, CancelJob{JobID: "X", Reason: "user"})
	h.wantJob("both", JobWaiting, "")
	h.wantJob("bothfail", JobCancelled, "dependency after X:ok cannot be met: job X is cancelled")
	if d := h.job("bothfail").Deps; d.Decision != DecisionCancelled || d.DecidedBy != "X" {
		t.Fatalf("bothfail deps %+v", d)
	}
	h.finish("A", true)
	h.wantJob("ok", JobQueued, "")
	h.wantJob("any", JobQueued, "")
	h.wantJob("both", JobQueued, "")
	h.wantJob("notok", JobCancelled, "dependency after A:failed cannot be met: job A is succeeded")
	if d := h.job("ok").Deps; d.Decision != DecisionReleased || d.DecidedBy != "A" {
		t.Fatalf("ok deps %+v", d)
	}

	// Parents already ended: decided at submit.
	h.finish("B", false)
	h.submitAfter("late-notok", "B:failed")
	h.wantJob("late-notok", JobQueued, "")
	h.submitAfter("late-ok", "B:ok", "A:ok")
	h.wantJob("late-ok", JobCancelled, "dependency after B:ok cannot be met: job B is failed")
	h.submitAfter("late-any", "B:any", "A:ok")
	h.wantJob("late-any", JobQueued, "")
	// A retry re-counts the parents as they are now: still unmet.
	h.must(CmdRetryJob, RetryJob{JobID: "notok"})
	h.wantJob("notok", JobCancelled, "dependency after A:failed cannot be met: job A is succeeded")
	// A cancelled child's own children follow it (workflow skip rules).
	h.submitAfter("grandchild", "notok:ok")
	h.wantJob("grandchild", JobCancelled, "job notok is cancelled")
	checkIndexes(t, h.f)
}

// A workflow's cancel holds the decisions of its own jobs only: a job
// outside it that waits on one of them is decided at once.
func TestAfterOutsideACancelledWorkflow(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	if r := h.submitWF("W", wfJob{name: "a"}, wfJob{name: "b", deps: []string{"a"}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	h.submitAfter("onb", wfJobID("W", "b")+":cancelled")
	h.submitAfter("ona", wfJobID("W", "a")+":ok")
	h.must(CmdCancelWorkflow, CancelWorkflow{ID: "W", Reason: "user"})
	h.wantJob("onb", JobQueued, "")
	h.wantJob("ona", JobCancelled, "is cancelled")
	checkIndexes(t, h.f)
}

func TestAfterBadInput(t *testing.T) {
	h := newHarness(t)
	h.submit("A")
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "other", Spec: JobSpec{Command: []string{"true"}, Namespace: "team-b"}}}})
	for name, spec := range map[string]JobSpec{
		"after without depends_on": {After: []AfterDep{{Job: "A", On: AfterOK}}},
		"after differs":            {DependsOn: []string{"A"}, After: []AfterDep{{Job: "B", On: AfterOK}}},
		"unknown requirement":      {DependsOn: []string{"A"}, After: []AfterDep{{Job: "A", On: "notok"}}},
		"with a condition":         {DependsOn: []string{"A"}, After: []AfterDep{{Job: "A", On: AfterOK}}, Condition: ConditionAlways},
		"unknown parent":           {DependsOn: []string{"nope"}, After: []AfterDep{{Job: "nope", On: AfterOK}}},
		"another namespace":        {DependsOn: []string{"other"}, After: []AfterDep{{Job: "other", On: AfterOK}}},
		"depends_on elsewhere":     {DependsOn: []string{"other"}},
	} {
		before := h.hash()
		spec.Command = []string{"true"}
		r := h.apply(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "C", Spec: spec}}})
		if !errors.Is(r.Err, ErrBadCommand) {
			t.Errorf("%s: err %v, want a bad command", name, r.Err)
		}
		if after := h.hash(); after != before {
			t.Errorf("%s: the refused submit changed the state", name)
		}
	}
}

// Singleton jobs of one name run one at a time in submit order, per
// namespace; a plain job of the name does not queue; one whose
// predecessor already ended starts at once.
func TestSingletonQueuesByName(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	single := func(id, name, ns string, after ...AfterDep) *Result {
		spec := JobSpec{Name: name, Namespace: ns, Command: []string{"true"}, MaxAttempts: 1, Singleton: true}
		for _, d := range after {
			spec.DependsOn, spec.After = append(spec.DependsOn, d.Job), append(spec.After, d)
		}
		return h.apply(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: id, Spec: spec}}})
	}
	if r := single("s1", "nightly", ""); r.Err != nil {
		t.Fatal(r.Err)
	}
	h.wantJob("s1", JobQueued, "")
	// Two in one entry: the second waits on the first.
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{
		{ID: "s2", Spec: JobSpec{Name: "nightly", Command: []string{"true"}, MaxAttempts: 1, Singleton: true}},
		{ID: "s3", Spec: JobSpec{Name: "nightly", Command: []string{"true"}, MaxAttempts: 1, Singleton: true}},
	}})
	h.wantJob("s2", JobWaiting, "")
	h.wantJob("s3", JobWaiting, "")
	if got := h.job("s3").Spec.After; len(got) != 1 || got[0] != (AfterDep{Job: "s2", On: AfterAny}) {
		t.Fatalf("s3 after %+v, want s2:any", got)
	}
	// Another namespace, and a plain job of the name: not queued.
	single("o1", "nightly", "team-b")
	h.wantJob("o1", JobQueued, "")
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "plain", Spec: JobSpec{Name: "nightly", Command: []string{"true"}}}}})
	h.wantJob("plain", JobQueued, "")
	// A failure releases the next one (any): s1 fails, s2 runs, s3 waits.
	h.finish("s1", false)
	h.wantJob("s2", JobQueued, "")
	h.wantJob("s3", JobWaiting, "")
	h.must(CmdCancelJob, CancelJob{JobID: "s2", Reason: "user"})
	h.wantJob("s3", JobQueued, "")
	// With after on another job: both must hold.
	h.submit("X")
	single("s4", "nightly", "", AfterDep{Job: "X", On: AfterOK})
	h.finish("s3", true)
	h.wantJob("s4", JobWaiting, "")
	h.finish("X", true)
	h.wantJob("s4", JobQueued, "")
	h.finish("s4", true)
	// The last one ended: the next starts at once.
	single("s5", "nightly", "")
	h.wantJob("s5", JobQueued, "")
	checkIndexes(t, h.f)

	for name, spec := range map[string]JobSpec{
		"no name":         {Singleton: true},
		"with condition":  {Name: "n", Singleton: true, DependsOn: []string{"X"}, Condition: ConditionAlways},
		"with depends_on": {Name: "n", Singleton: true, DependsOn: []string{"X"}},
	} {
		spec.Command = []string{"true"}
		if r := h.apply(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "bad", Spec: spec}}}); !errors.Is(r.Err, ErrBadCommand) || !strings.Contains(r.Err.Error(), "singleton") {
			t.Errorf("%s: %v, want a bad command naming singleton", name, r.Err)
		}
	}
}
