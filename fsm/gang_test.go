package fsm

import (
	"strings"
	"testing"
)

// gangHarness submits a gang of size n on nodes a, b, c and places it.
func gangHarness(t *testing.T, n, maxAttempts int) (*harness, uint64) {
	h := newHarness(t)
	for _, name := range []string{"a", "b", "c"} {
		h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: name, HTTPAddr: "10.0.0." + string(rune('0'+len(name))) + name + ":7070", Capacity: Resources{CPU: 4000, MemoryMB: 8192}}})
	}
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "g", Spec: JobSpec{Command: []string{"true"}, MaxAttempts: maxAttempts, Gang: &GangSpec{Size: n}}}}})
	tasks := []TaskSlot{{Node: "a", Port: 31000}, {Node: "b", Port: 31000}, {Node: "c", Port: 31001}}[:n]
	r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: "g", Node: "a", Tasks: tasks}}})
	if len(r.Skipped) > 0 {
		t.Fatalf("placement skipped: %v", r.Skipped)
	}
	return h, r.Index
}

func (h *harness) report(id string, num int, token uint64, node string, st AttemptState, reason string, exit *int) *Result {
	h.t.Helper()
	return h.apply(CmdReport, ReportAttempt{JobID: id, Attempt: num, FencingToken: token, Node: node, State: st, Reason: reason, ExitCode: exit})
}

func TestGangPlacedAtomically(t *testing.T) {
	h, tok := gangHarness(t, 3, 2)
	j := h.job("g")
	if j.State != JobRunning || j.Current != 1 || j.Attempts != 3 || j.Gang.Live != 3 || j.Gang.Token != tok {
		t.Fatalf("job after placement: state %s current %d attempts %d gang %+v", j.State, j.Current, j.Attempts, j.Gang)
	}
	for i, node := range []string{"a", "b", "c"} {
		at := h.attempt("g", 1+i)
		if at.Node != node || at.FencingToken != tok || at.Task == nil || at.Task.Index != i || at.Task.Size != 3 {
			t.Fatalf("task %d: %+v task %+v", i, at, at.Task)
		}
		if got := strings.Join(at.Task.Peers, ","); got != "10.0.0.1a:31000,10.0.0.1b:31000,10.0.0.1c:31001" {
			t.Fatalf("peers %s", got)
		}
	}
}

func TestGangPlacementAllOrNothing(t *testing.T) {
	cases := []struct {
		name  string
		tasks []TaskSlot
		want  string
	}{
		{"too few tasks", []TaskSlot{{Node: "a", Port: 31000}}, "1 tasks, the gang 2"},
		{"same node when spread", []TaskSlot{{Node: "a", Port: 31000}, {Node: "a", Port: 31001}}, "holds another task"},
		{"unknown node", []TaskSlot{{Node: "a", Port: 31000}, {Node: "zz", Port: 31000}}, "not found"},
		{"draining node", []TaskSlot{{Node: "a", Port: 31000}, {Node: "b", Port: 31000}}, "draining"},
		{"bad port", []TaskSlot{{Node: "a", Port: 0}, {Node: "c", Port: 31000}}, "port 0"},
		{"no tasks", nil, "placed with tasks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.addNode("a")
			h.addNode("b")
			h.addNode("c")
			h.must(CmdNodeState, SetNodeState{Name: "b", Eligibility: Draining})
			h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "g", Spec: JobSpec{Command: []string{"true"}, Gang: &GangSpec{Size: 2}}}}})
			before := h.hash()
			r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: "g", Node: "a", Tasks: tc.tasks}}})
			if !strings.Contains(r.Skipped["g"], tc.want) {
				t.Fatalf("skipped %q, want %q", r.Skipped["g"], tc.want)
			}
			if j := h.job("g"); j.State != JobQueued || j.Attempts != 0 {
				t.Fatalf("job %s with %d attempts after a refused gang placement", j.State, j.Attempts)
			}
			_ = before
		})
	}
}

func TestGangSizeRefused(t *testing.T) {
	h := newHarness(t)
	for _, n := range []int{0, 1, MaxGangSize + 1} {
		r := h.apply(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "g", Spec: JobSpec{Command: []string{"true"}, Gang: &GangSpec{Size: n}}}}})
		if r.Err == nil || !strings.Contains(r.Err.Error(), "gang.size") {
			t.Fatalf("size %d: %v", n, r.Err)
		}
	}
}

func TestGangTaskFailureStopsSiblingsAndRetries(t *testing.T) {
	h, tok := gangHarness(t, 3, 3)
	for i, n := range []string{"a", "b", "c"} {
		h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 1 + i, FencingToken: tok, Node: n, State: AttemptRunning})
	}
	one := 1
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 2, FencingToken: tok, Node: "b", State: AttemptFailed, ExitCode: &one})
	for _, num := range []int{1, 3} {
		if at := h.attempt("g", num); at.CancelRequested != ReasonGang {
			t.Fatalf("sibling %d: cancel requested %q", num, at.CancelRequested)
		}
	}
	if j := h.job("g"); j.State != JobRunning || j.Gang.Live != 2 {
		t.Fatalf("gang %s live %d while siblings stop", j.State, j.Gang.Live)
	}
	// A stale report (another token) is refused.
	if r := h.report("g", 1, tok+100, "a", AttemptKilled, "", nil); r.Err == nil {
		t.Fatal("stale token accepted")
	}
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 1, FencingToken: tok, Node: "a", State: AttemptKilled})
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 3, FencingToken: tok, Node: "c", State: AttemptKilled})
	j := h.job("g")
	if j.State != JobRetrying || j.Current != 0 || j.NextRunAt.IsZero() {
		t.Fatalf("gang %s current %d next %v, want retrying", j.State, j.Current, j.NextRunAt)
	}
	if got := j.Gang.Counted; got[0] != 0 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("counted %v: only the failing task uses an attempt", got)
	}
	if at := h.attempt("g", 1); at.Reason != ReasonGang || at.Counted {
		t.Fatalf("sibling attempt %+v", at)
	}
	// The next placement numbers tasks after the first three.
	h.now = j.NextRunAt
	r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: "g", Node: "a", Tasks: []TaskSlot{{Node: "c", Port: 31000}, {Node: "b", Port: 31000}, {Node: "a", Port: 31000}}}}})
	if len(r.Skipped) > 0 {
		t.Fatalf("re-placement skipped: %v", r.Skipped)
	}
	j = h.job("g")
	if j.Current != 4 || j.Gang.Token != r.Index || j.Gang.Placements != 2 {
		t.Fatalf("re-placed gang current %d token %d placements %d", j.Current, j.Gang.Token, j.Gang.Placements)
	}
	// The old placement's attempts are no longer current.
	if r := h.report("g", 2, tok, "b", AttemptRunning, "", nil); r.Err == nil {
		t.Fatal("report of an old placement accepted")
	}
	for i, n := range []string{"c", "b", "a"} {
		h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 4 + i, FencingToken: r.Index, Node: n, State: AttemptSucceeded})
	}
	if j := h.job("g"); j.State != JobSucceeded {
		t.Fatalf("gang %s after all tasks succeeded", j.State)
	}
}

func TestGangExhaustsOnlyFailingTaskBudget(t *testing.T) {
	h, tok := gangHarness(t, 2, 1)
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 1, FencingToken: tok, Node: "a", State: AttemptFailed})
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 2, FencingToken: tok, Node: "b", State: AttemptKilled})
	j := h.job("g")
	if j.State != JobFailed || !strings.Contains(j.Reason, "task 0") {
		t.Fatalf("gang %s (%s), want failed by task 0", j.State, j.Reason)
	}
	// Retry gives a fresh budget.
	h.must(CmdRetryJob, RetryJob{JobID: "g"})
	if j := h.job("g"); j.State != JobQueued || j.Gang.Counted[0] != 0 {
		t.Fatalf("retried gang %s counted %v", j.State, j.Gang.Counted)
	}
}

func TestGangLostTaskRequeues(t *testing.T) {
	h, tok := gangHarness(t, 3, 1)
	h.must(CmdMarkLost, MarkLost{Node: "c", Attempts: []AttemptRef{{JobID: "g", Attempt: 3, FencingToken: tok}}})
	if at := h.attempt("g", 2); at.CancelRequested != ReasonGang {
		t.Fatalf("sibling on b not stopped: %q", at.CancelRequested)
	}
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 1, FencingToken: tok, Node: "a", State: AttemptKilled})
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 2, FencingToken: tok, Node: "b", State: AttemptKilled})
	if j := h.job("g"); j.State != JobQueued || j.CountedAttempts != 0 {
		t.Fatalf("gang %s counted %d after a lost node, want queued with no attempt used", j.State, j.CountedAttempts)
	}
}

func TestGangCancel(t *testing.T) {
	h, tok := gangHarness(t, 2, 1)
	h.must(CmdCancelJob, CancelJob{JobID: "g"})
	for _, num := range []int{1, 2} {
		if at := h.attempt("g", num); at.CancelRequested != ReasonCancelled {
			t.Fatalf("task %d cancel %q", num, at.CancelRequested)
		}
	}
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 1, FencingToken: tok, Node: "a", State: AttemptKilled})
	if j := h.job("g"); j.State != JobRunning {
		t.Fatalf("gang %s with a task still live", j.State)
	}
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 2, FencingToken: tok, Node: "b", State: AttemptKilled})
	if j := h.job("g"); j.State != JobCancelled {
		t.Fatalf("gang %s, want cancelled", j.State)
	}
}

func TestGangDrainStopIsUnit(t *testing.T) {
	h, tok := gangHarness(t, 3, 1)
	h.must(CmdStopAttempts, StopAttempts{Reason: ReasonDrained, Attempts: []AttemptRef{{JobID: "g", Attempt: 2, FencingToken: tok}}})
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 2, FencingToken: tok, Node: "b", State: AttemptKilled})
	for _, num := range []int{1, 3} {
		if at := h.attempt("g", num); at.CancelRequested != ReasonGang {
			t.Fatalf("task %d not stopped with the drained one: %q", num, at.CancelRequested)
		}
	}
}

func TestPreemptedAttemptRequeuedWithoutUsingAnAttempt(t *testing.T) {
	h := newHarness(t)
	h.addNode("a")
	h.submit("v")
	tok := h.place("v", "a")
	h.must(CmdStopAttempts, StopAttempts{Reason: ReasonPreempted, By: "hi", Attempts: []AttemptRef{{JobID: "v", Attempt: 1, FencingToken: tok}}})
	h.must(CmdReport, ReportAttempt{JobID: "v", Attempt: 1, FencingToken: tok, Node: "a", State: AttemptKilled})
	j := h.job("v")
	if j.State != JobQueued || j.CountedAttempts != 0 || j.Preemptions != 1 {
		t.Fatalf("preempted job %s counted %d preemptions %d", j.State, j.CountedAttempts, j.Preemptions)
	}
	if at := h.attempt("v", 1); at.State != AttemptKilled || at.Reason != ReasonPreempted || at.Counted {
		t.Fatalf("victim attempt %+v", at)
	}
	var evs []Event
	if err := h.f.View(func(tx *Tx) (err error) { evs, err = tx.JobEvents("v"); return err }); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || strings.Contains(e.Reason, "preempted by job hi")
	}
	if !found {
		t.Fatalf("timeline does not say who preempted: %+v", evs)
	}
}

func TestCheckpointInRaft(t *testing.T) {
	h := newHarness(t)
	before := h.hash()
	h.submit("j")
	h.must(CmdSetCheckpoint, SetCheckpoint{JobID: "j", Data: []byte("step 41")})
	var got []byte
	read := func() {
		if err := h.f.View(func(tx *Tx) error { got = tx.Checkpoint("j"); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if read(); string(got) != "step 41" {
		t.Fatalf("checkpoint %q", got)
	}
	if r := h.apply(CmdSetCheckpoint, SetCheckpoint{JobID: "j", Data: make([]byte, CheckpointMax+1)}); r.Err == nil {
		t.Fatal("checkpoint over the cap accepted")
	}
	if r := h.apply(CmdSetCheckpoint, SetCheckpoint{JobID: "nope", Data: []byte("x")}); r.Err == nil {
		t.Fatal("checkpoint of an unknown job accepted")
	}
	h.must(CmdSetCheckpoint, SetCheckpoint{JobID: "j"})
	if read(); got != nil {
		t.Fatalf("cleared checkpoint %q", got)
	}
	_ = before
}
