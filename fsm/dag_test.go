package fsm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// wfJob is a workflow job in tests: name, parents (names), condition.
type wfJob struct {
	name string
	deps []string
	cond Condition
}

// wfIDs names a workflow's jobs in tests.
func wfJobID(wf, name string) string { return wf + "-" + name }

// submitWF submits a workflow (IDs wfJobID(wf, name)) and returns the result.
func (h *harness) submitWF(wf string, jobs ...wfJob) *Result {
	h.t.Helper()
	p := SubmitWorkflow{ID: wf, Name: "test"}
	for _, j := range jobs {
		spec := JobSpec{Name: j.name, Command: []string{"true"}, MaxAttempts: 1, Condition: j.cond}
		for _, d := range j.deps {
			spec.DependsOn = append(spec.DependsOn, wfJobID(wf, d))
		}
		p.Jobs = append(p.Jobs, NewJob{ID: wfJobID(wf, j.name), Spec: spec})
	}
	return h.apply(CmdSubmitWorkflow, p)
}

// finish places a queued job on n1 and reports it succeeded or failed.
func (h *harness) finish(id string, ok bool) {
	h.t.Helper()
	tok := h.place(id, "n1")
	r := ReportAttempt{JobID: id, Attempt: h.job(id).Current, FencingToken: tok, Node: "n1", State: AttemptSucceeded, ExitCode: intp(0)}
	if !ok {
		r.State, r.ExitCode = AttemptFailed, intp(1)
	}
	h.must(CmdReport, r)
}

func (h *harness) wantStates(t *testing.T, wf string, want map[string]JobState) {
	t.Helper()
	for name, st := range want {
		if got := h.job(wfJobID(wf, name)).State; got != st {
			t.Errorf("%s: %s, want %s (%s)", name, got, st, h.job(wfJobID(wf, name)).Reason)
		}
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		c          Condition
		p, s, f, t int // parents, succeeded, failed, terminal
		want       string
	}{
		{ConditionSuccess, 2, 1, 0, 1, ""},
		{ConditionSuccess, 2, 2, 0, 2, DecisionReleased},
		{"", 2, 1, 1, 2, DecisionSkipped},
		{ConditionSuccess, 3, 0, 0, 1, DecisionSkipped}, // one cancelled: can never all succeed
		{ConditionFailure, 2, 1, 0, 1, ""},
		{ConditionFailure, 2, 0, 1, 1, DecisionReleased},
		{ConditionFailure, 2, 2, 0, 2, DecisionSkipped},
		{ConditionAlways, 2, 0, 1, 1, ""},
		{ConditionAlways, 2, 0, 1, 2, DecisionReleased},
		{ConditionOneSuccess, 3, 1, 0, 1, DecisionReleased},
		{ConditionOneSuccess, 2, 0, 1, 1, ""},
		{ConditionOneSuccess, 2, 0, 1, 2, DecisionSkipped},
	}
	for _, tc := range tests {
		got := Decide(tc.c, Deps{Parents: tc.p, Succeeded: tc.s, Failed: tc.f, Terminal: tc.t})
		if got != tc.want {
			t.Errorf("Decide(%q, %d/%d/%d/%d) = %q, want %q", tc.c, tc.p, tc.s, tc.f, tc.t, got, tc.want)
		}
	}
}

// TestWorkflowDiamond: a → (b, c) → d → e; b fails, so d (success) is
// skipped by b, e is skipped by d (cascade), and "cleanup" (always, on b
// and c) and "alert" (failure, on b) run.
func TestWorkflowDiamond(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	r := h.submitWF("W1",
		wfJob{name: "a"},
		wfJob{name: "b", deps: []string{"a"}},
		wfJob{name: "c", deps: []string{"a"}},
		wfJob{name: "d", deps: []string{"b", "c"}},
		wfJob{name: "e", deps: []string{"d"}},
		wfJob{name: "cleanup", deps: []string{"b", "c"}, cond: ConditionAlways},
		wfJob{name: "alert", deps: []string{"b"}, cond: ConditionFailure},
	)
	if r.Err != nil || len(r.Jobs) != 7 {
		t.Fatalf("submit: %v %v", r.Err, r.Jobs)
	}
	h.wantStates(t, "W1", map[string]JobState{"a": JobQueued, "b": JobWaiting, "d": JobWaiting, "cleanup": JobWaiting})
	h.finish(wfJobID("W1", "a"), true)
	// Released in the same entry as a's finish.
	h.wantStates(t, "W1", map[string]JobState{"b": JobQueued, "c": JobQueued, "d": JobWaiting})
	if d := h.job(wfJobID("W1", "b")).Deps; d.Decision != DecisionReleased || d.DecidedBy != wfJobID("W1", "a") {
		t.Errorf("b's edge: %+v", d)
	}
	skips := h.f.Subscribe(100)
	h.finish(wfJobID("W1", "b"), false)
	skipped := 0
	for len(skips.C()) > 0 {
		if e := <-skips.C(); e.Kind() == "job.skipped" && e.Workflow == "W1" {
			skipped++
		}
	}
	skips.Close()
	if skipped != 2 {
		t.Errorf("%d job.skipped events of W1, want 2 (d and e)", skipped)
	}
	h.wantStates(t, "W1", map[string]JobState{"d": JobSkipped, "e": JobSkipped, "alert": JobQueued, "cleanup": JobWaiting})
	if d := h.job(wfJobID("W1", "d")).Deps; d.Decision != DecisionSkipped || d.DecidedBy != wfJobID("W1", "b") {
		t.Errorf("d's edge: %+v", d)
	}
	if d := h.job(wfJobID("W1", "e")).Deps; d.DecidedBy != wfJobID("W1", "d") {
		t.Errorf("e's edge: %+v", d)
	}
	h.finish(wfJobID("W1", "c"), true)
	h.wantStates(t, "W1", map[string]JobState{"cleanup": JobQueued})
	h.finish(wfJobID("W1", "cleanup"), true)
	var w *Workflow
	_ = h.f.View(func(tx *Tx) (err error) { w, err = tx.Workflow("W1"); return err })
	if w.State != WorkflowRunning {
		t.Fatalf("workflow %s before alert ran", w.State)
	}
	sub := h.f.Subscribe(100)
	h.finish(wfJobID("W1", "alert"), true)
	_ = h.f.View(func(tx *Tx) (err error) { w, err = tx.Workflow("W1"); return err })
	if w.State != WorkflowFailed || w.FinishedAt.IsZero() || w.Counts[JobSkipped] != 2 || w.Counts[JobSucceeded] != 4 {
		t.Fatalf("workflow: %+v", w)
	}
	sawFinish := false
	for len(sub.C()) > 0 {
		if e := <-sub.C(); e.Kind() == "workflow.finished" && e.Topic() == TopicWorkflow && e.Workflow == "W1" &&
			e.State == string(WorkflowFailed) && e.Reason == "succeeded=4 failed=1 skipped=2" {
			sawFinish = true
		}
	}
	if !sawFinish {
		t.Error("no workflow.finished event")
	}
	checkIndexes(t, h.f)

	// Retry: b and its skipped dependents run again; a, c, cleanup and
	// alert (succeeded) are kept.
	h.must(CmdRetryWorkflow, RetryWorkflow{ID: "W1"})
	h.wantStates(t, "W1", map[string]JobState{"a": JobSucceeded, "b": JobQueued, "d": JobWaiting, "e": JobWaiting, "cleanup": JobSucceeded})
	_ = h.f.View(func(tx *Tx) (err error) { w, err = tx.Workflow("W1"); return err })
	if w.State != WorkflowRunning || !w.FinishedAt.IsZero() {
		t.Fatalf("after retry: %+v", w)
	}
	h.finish(wfJobID("W1", "b"), true)
	h.finish(wfJobID("W1", "d"), true)
	h.finish(wfJobID("W1", "e"), true)
	_ = h.f.View(func(tx *Tx) (err error) { w, err = tx.Workflow("W1"); return err })
	if w.State != WorkflowSucceeded {
		t.Fatalf("after the re-run: %+v", w)
	}
	if r := h.apply(CmdRetryWorkflow, RetryWorkflow{ID: "W1"}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("retry of a succeeded workflow: %v", r.Err)
	}
	checkIndexes(t, h.f)
}

// TestWorkflowCancel: every job that is not terminal becomes cancelled
// (the waiting ones too, not skipped); a running one once its node reports.
func TestWorkflowCancel(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submitWF("W2", wfJob{name: "a"}, wfJob{name: "b", deps: []string{"a"}}, wfJob{name: "c", deps: []string{"b"}, cond: ConditionAlways}, wfJob{name: "x"})
	tok := h.place(wfJobID("W2", "a"), "n1")
	h.must(CmdCancelWorkflow, CancelWorkflow{ID: "W2", Reason: "user"})
	h.wantStates(t, "W2", map[string]JobState{"a": JobRunning, "b": JobCancelled, "c": JobCancelled, "x": JobCancelled})
	if at := h.attempt(wfJobID("W2", "a"), 1); at.CancelRequested != ReasonCancelled {
		t.Fatalf("running attempt not asked to stop: %+v", at)
	}
	h.must(CmdReport, ReportAttempt{JobID: wfJobID("W2", "a"), Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptKilled})
	h.wantStates(t, "W2", map[string]JobState{"a": JobCancelled, "c": JobCancelled})
	var w *Workflow
	_ = h.f.View(func(tx *Tx) (err error) { w, err = tx.Workflow("W2"); return err })
	if w.State != WorkflowCancelled {
		t.Fatalf("workflow %+v", w)
	}
	if r := h.apply(CmdCancelWorkflow, CancelWorkflow{ID: "W2"}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("second cancel: %v", r.Err)
	}
	// Retry re-runs all of it from the roots.
	h.must(CmdRetryWorkflow, RetryWorkflow{ID: "W2"})
	h.wantStates(t, "W2", map[string]JobState{"a": JobQueued, "b": JobWaiting, "c": JobWaiting, "x": JobQueued})
	checkIndexes(t, h.f)
}

// TestWorkflowRefusals: bad workflows are refused whole, naming the field.
func TestWorkflowRefusals(t *testing.T) {
	h := newHarness(t)
	big := make([]wfJob, MaxWorkflowJobs+1)
	for i := range big {
		big[i] = wfJob{name: fmt.Sprintf("j%d", i)}
	}
	tests := []struct {
		name string
		jobs []wfJob
		want string
	}{
		{"cycle", []wfJob{{name: "x"}, {name: "a", deps: []string{"b"}}, {name: "b", deps: []string{"c"}}, {name: "c", deps: []string{"a"}}}, "cycle a -> b -> c -> a"},
		{"self", []wfJob{{name: "a", deps: []string{"a"}}}, "jobs[0].depends_on: the job depends on itself"},
		{"twice", []wfJob{{name: "a"}, {name: "b", deps: []string{"a", "a"}}}, "jobs[1].depends_on: W-a listed twice"},
		{"unknown", []wfJob{{name: "a", deps: []string{"zz"}}}, `jobs[0].depends_on: "W-zz" is not a job of this workflow`},
		{"duplicate name", []wfJob{{name: "a"}, {name: "a"}}, `jobs[1].name: "a" is also the name of jobs[0]`},
		{"bad condition", []wfJob{{name: "a"}, {name: "b", deps: []string{"a"}, cond: "sometimes"}}, `jobs[1].condition: "sometimes"`},
		{"condition without parents", []wfJob{{name: "a", cond: ConditionAlways}}, "jobs[0].condition: set without depends_on"},
		{"bad name", []wfJob{{name: "x y"}}, `jobs[0].name: "x y"`},
		{"too many", big, "10001 jobs (max 10000 per workflow)"},
		{"empty", nil, "at least one job"},
	}
	before := h.hash()
	for _, tc := range tests {
		r := h.submitWF("W", tc.jobs...)
		if r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, r.Err, tc.want)
		}
		if !errors.Is(r.Err, ErrBadCommand) && !errors.Is(r.Err, ErrConflict) {
			t.Errorf("%s: %v is neither bad command nor conflict", tc.name, r.Err)
		}
	}
	if h.hash() != before {
		// Only the applied index moved (it is not hashed).
		t.Fatal("a refused workflow changed the state")
	}
	// Job IDs are unique across workflows.
	h.must(CmdSubmitWorkflow, SubmitWorkflow{ID: "W0", Jobs: []NewJob{{ID: "j1", Spec: JobSpec{Name: "a"}}}})
	if r := h.apply(CmdSubmitWorkflow, SubmitWorkflow{ID: "W", Jobs: []NewJob{{ID: "j1", Spec: JobSpec{Name: "a"}}}}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("a job ID of another workflow: %v", r.Err)
	}
	// The same workflow ID again is a retried command: the same jobs.
	if r := h.must(CmdSubmitWorkflow, SubmitWorkflow{ID: "W0", Jobs: []NewJob{{ID: "j9", Spec: JobSpec{Name: "b"}}}}); len(r.Jobs) != 1 || r.Jobs[0].ID != "j1" || !r.Jobs[0].Duplicate {
		t.Fatalf("resubmitted workflow: %+v", r.Jobs)
	}
}

// TestDependsOnExistingJobs: plain submits depending on job IDs (Slurm's
// afterok/afternotok/afterany), including parents already finished.
func TestDependsOnExistingJobs(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: jobID(1), Spec: JobSpec{MaxAttempts: 1}}, {ID: jobID(2)}}})
	h.finish(jobID(1), false)
	sub := func(id string, cond Condition, parents ...string) *Result {
		return h.apply(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: id, Spec: JobSpec{Command: []string{"true"}, DependsOn: parents, Condition: cond}}}})
	}
	if r := sub(jobID(10), ConditionFailure, jobID(1)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if j := h.job(jobID(10)); j.State != JobQueued || j.Deps.DecidedBy != jobID(1) {
		t.Fatalf("afternotok on a failed job: %s %+v", j.State, j.Deps)
	}
	if r := sub(jobID(11), "", jobID(1), jobID(2)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if j := h.job(jobID(11)); j.State != JobSkipped || j.Deps.DecidedBy != jobID(1) {
		t.Fatalf("afterok on a failed job: %s %+v", j.State, j.Deps)
	}
	if r := sub(jobID(12), ConditionAlways, jobID(2)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if j := h.job(jobID(12)); j.State != JobWaiting {
		t.Fatalf("afterany on a queued job: %s", j.State)
	}
	// A release is not a time-based release: a stale ReleaseJobs or Place
	// must not start a job that waits on its parents.
	if r := h.must(CmdRelease, ReleaseJobs{JobIDs: []string{jobID(12)}}); len(r.Skipped) != 1 {
		t.Fatalf("released a blocked job: %+v", r)
	}
	if r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: jobID(12), Node: "n1"}}}); len(r.Skipped) != 1 {
		t.Fatalf("placed a blocked job: %+v", r)
	}
	h.must(CmdCancelJob, CancelJob{JobID: jobID(2)})
	if j := h.job(jobID(12)); j.State != JobQueued || j.Deps.DecidedBy != jobID(2) {
		t.Fatalf("afterany after a cancel: %s %+v", j.State, j.Deps)
	}
	if r := sub(jobID(13), "", "nope"); !errors.Is(r.Err, ErrBadCommand) || !strings.Contains(r.Err.Error(), `jobs[0].depends_on: no job "nope"`) {
		t.Fatalf("unknown parent: %v", r.Err)
	}
	// Retrying the skipped job re-counts its parents: still skipped by
	// the failed one until that is retried.
	h.must(CmdRetryJob, RetryJob{JobID: jobID(1)})
	h.must(CmdRetryJob, RetryJob{JobID: jobID(11)})
	if j := h.job(jobID(11)); j.State != JobSkipped || j.Deps.DecidedBy != jobID(2) {
		t.Fatalf("retried child: %s %+v", j.State, j.Deps)
	}
	checkIndexes(t, h.f)
}

// TestDAGProperty: random DAGs with random conditions and random
// outcomes, run to the end in a random order: every job ends in the state
// its parents dictate (computed independently, in topological order), no
// skipped job ever had an attempt, and no job was placed before its
// parents had decided its condition.
func TestDAGProperty(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { dagProperty(t, seed) })
	}
}

func dagProperty(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 99))
	h := newHarness(t)
	h.addNode("n1")
	n := 2 + rnd.IntN(30)
	jobs := make([]wfJob, n)
	ok := make([]bool, n) // each job's own outcome if it runs
	for i := range jobs {
		jobs[i].name = fmt.Sprint("j", i)
		for p := range i {
			if rnd.IntN(4) == 0 {
				jobs[i].deps = append(jobs[i].deps, jobs[p].name)
			}
		}
		if len(jobs[i].deps) > 0 {
			jobs[i].cond = Conditions[rnd.IntN(len(Conditions))]
		}
		ok[i] = rnd.IntN(3) > 0
	}
	// Shuffle the submit order: it must not matter.
	perm := rnd.Perm(n)
	shuffled := make([]wfJob, n)
	for i, p := range perm {
		shuffled[i] = jobs[p]
	}
	if r := h.submitWF("P", shuffled...); r.Err != nil {
		t.Fatal(r.Err)
	}
	index := map[string]int{}
	for i, j := range jobs {
		index[j.name] = i
	}
	var kept []JobState // states a retry keeps (nil: a fresh run)
	if seed%3 == 0 {
		// Cancel part way: every job not finished becomes cancelled and
		// nothing starts afterwards; the retry then runs the rest.
		runDAG(t, h, rnd, jobs, ok, rnd.IntN(n))
		if r := h.apply(CmdCancelWorkflow, CancelWorkflow{ID: "P"}); r.Err != nil && !errors.Is(r.Err, ErrConflict) {
			t.Fatal(r.Err) // a conflict: it had finished already
		}
		kept = make([]JobState, n)
		for i, j := range jobs {
			got := h.job(wfJobID("P", j.name))
			if !got.State.Terminal() {
				t.Fatalf("%s is %s after the cancel", j.name, got.State)
			}
			kept[i] = got.State
		}
		if r := h.apply(CmdRetryWorkflow, RetryWorkflow{ID: "P"}); r.Err != nil && !errors.Is(r.Err, ErrConflict) {
			t.Fatal(r.Err) // a conflict: everything had succeeded
		}
	}
	runDAG(t, h, rnd, jobs, ok, -1)
	want := dagOracle(t, jobs, ok, kept)
	checkDAG(t, h, jobs, want)
	// Retry with new outcomes: succeeded jobs are kept, the rest re-run.
	if slices.ContainsFunc(want, func(s JobState) bool { return s != JobSucceeded }) {
		for i := range ok {
			ok[i] = rnd.IntN(3) > 0
		}
		h.must(CmdRetryWorkflow, RetryWorkflow{ID: "P"})
		runDAG(t, h, rnd, jobs, ok, -1)
		checkDAG(t, h, jobs, dagOracle(t, jobs, ok, want))
	}
}

// runDAG finishes queued jobs of workflow P in a random order until none
// is queued (or after limit jobs, if limit >= 0), checking invariant 4 at
// each start.
func runDAG(t *testing.T, h *harness, rnd *rand.Rand, jobs []wfJob, ok []bool, limit int) {
	for step := 0; step != limit; step++ {
		var queued []int
		for i := range jobs {
			if h.job(wfJobID("P", jobs[i].name)).State == JobQueued {
				queued = append(queued, i)
			}
		}
		if len(queued) == 0 {
			break
		}
		i := queued[rnd.IntN(len(queued))]
		// Invariant 4: the parents' states now release it.
		if len(jobs[i].deps) > 0 {
			d := Deps{Parents: len(jobs[i].deps)}
			for _, p := range jobs[i].deps {
				d.count(outcomePending, outcomeOf(h.job(wfJobID("P", p)).State))
			}
			if got := Decide(jobs[i].cond, d); got != DecisionReleased {
				t.Fatalf("%s (%s) queued while its parents give %+v (%q)", jobs[i].name, jobs[i].cond, d, got)
			}
		}
		h.finish(wfJobID("P", jobs[i].name), ok[i])
	}
}

// dagOracle computes every job's final state in index order (parents
// come first); a job that succeeded in kept stays succeeded (a retry).
func dagOracle(t *testing.T, jobs []wfJob, ok []bool, kept []JobState) []JobState {
	index := map[string]int{}
	for i, j := range jobs {
		index[j.name] = i
	}
	want := make([]JobState, len(jobs))
	for i, j := range jobs {
		if kept != nil && kept[i] == JobSucceeded {
			want[i] = JobSucceeded
			continue
		}
		d := Deps{Parents: len(j.deps)}
		for _, p := range j.deps {
			d.count(outcomePending, outcomeOf(want[index[p]]))
		}
		decision := DecisionReleased
		if len(j.deps) > 0 {
			decision = Decide(j.cond, d)
		}
		switch {
		case decision == DecisionSkipped:
			want[i] = JobSkipped
		case decision == "":
			t.Fatalf("%s: oracle undecided with every parent terminal", j.name)
		case ok[i]:
			want[i] = JobSucceeded
		default:
			want[i] = JobFailed
		}
	}
	return want
}

func checkDAG(t *testing.T, h *harness, jobs []wfJob, want []JobState) {
	t.Helper()
	var w *Workflow
	_ = h.f.View(func(tx *Tx) (err error) { w, err = tx.Workflow("P"); return err })
	counts := map[JobState]int{}
	for i, j := range jobs {
		got := h.job(wfJobID("P", j.name))
		counts[got.State]++
		if got.State != want[i] {
			t.Errorf("%s (deps %v, %s): %s, want %s", j.name, j.deps, j.cond, got.State, want[i])
		}
		if got.State == JobSkipped && got.Attempts != 0 && got.Deps.DecidedBy == "" {
			t.Errorf("%s: skipped after %d attempts", j.name, got.Attempts)
		}
	}
	if w.State == WorkflowRunning || fmt.Sprint(w.Counts) != fmt.Sprint(counts) {
		t.Errorf("workflow %s counts %v, jobs %v", w.State, w.Counts, counts)
	}
	checkIndexes(t, h.f)
}

// TestJobResults: a finished attempt keeps the job's result (cut at
// ResultMax with a warning), JobResult finds the deciding attempt's and
// JobInputs hands the parents' results to a child by name.
func TestJobResults(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submitWF("R", wfJob{name: "a"}, wfJob{name: "b"}, wfJob{name: "c", deps: []string{"a", "b"}})
	report := func(name string, result []byte, truncated bool) {
		id := wfJobID("R", name)
		tok := h.place(id, "n1")
		h.must(CmdReport, ReportAttempt{JobID: id, Attempt: h.job(id).Current, FencingToken: tok, Node: "n1",
			State: AttemptSucceeded, ExitCode: intp(0), Result: result, ResultTruncated: truncated})
	}
	report("a", []byte("rows=42"), false)
	report("b", make([]byte, ResultMax+10), false)
	if at := h.attempt(wfJobID("R", "b"), 1); len(at.Result) != ResultMax || !strings.Contains(at.Warning, "truncated") {
		t.Fatalf("oversized result: %d bytes, warning %q", len(at.Result), at.Warning)
	}
	err := h.f.View(func(tx *Tx) error {
		res, n, err := tx.JobResult(wfJobID("R", "a"))
		if err != nil || string(res) != "rows=42" || n != 1 {
			return fmt.Errorf("JobResult(a) = %q, %d, %v", res, n, err)
		}
		if _, _, err := tx.JobResult(wfJobID("R", "c")); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("JobResult of a waiting job: %v", err)
		}
		spec, err := tx.JobSpec(wfJobID("R", "c"))
		if err != nil {
			return err
		}
		in, err := tx.JobInputs(spec)
		if err != nil || len(in) != 2 || in[0].Name != "a" || string(in[0].Result) != "rows=42" || in[1].Name != "b" || len(in[1].Result) != ResultMax {
			return fmt.Errorf("JobInputs: %+v %v", in, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
