package fsm

import (
	"errors"
	"testing"
)

// TestReportBatch: each report in a batch has exactly the effect it has
// alone, and a refused one is skipped with its sentinel, not the batch.
func TestReportBatch(t *testing.T) {
	const n1 = "n1"
	h := newHarness(t)
	h.addNode(n1)
	h.submit("01A", "01B", "01C")
	ta, tb := h.place("01A", n1), h.place("01B", n1)
	r := h.must(CmdReportBatch, ReportAttempts{Reports: []ReportAttempt{
		{JobID: "01A", Attempt: 1, FencingToken: ta, Node: n1, State: AttemptRunning},
		{JobID: "01A", Attempt: 1, FencingToken: ta, Node: n1, State: AttemptSucceeded, ExitCode: intp(0)},
		{JobID: "01B", Attempt: 1, FencingToken: tb + 100, Node: n1, State: AttemptFailed}, // stale
		{JobID: "01Z", Attempt: 1, FencingToken: 1, Node: n1, State: AttemptSucceeded},     // no such job
		{JobID: "01B", Attempt: 1, FencingToken: tb, Node: n1, State: AttemptRunning},
		{JobID: "01C", Attempt: 1, FencingToken: tb, Node: n1, State: AttemptRunning}, // not placed
		{JobID: "01B", Attempt: 1, FencingToken: tb, Node: n1, State: "bogus"},
	}})
	wantErr := []error{nil, nil, ErrStaleToken, ErrNotFound, nil, ErrStaleToken, ErrBadCommand}
	for i, want := range wantErr {
		got := ReportBatchItemErr(r, i)
		if (want == nil) != (got == nil) || (want != nil && !errors.Is(got, want)) {
			t.Errorf("report %d: err = %v, want %v", i, got, want)
		}
	}
	if j := h.job("01A"); j.State != JobSucceeded {
		t.Errorf("job A = %s, want succeeded", j.State)
	}
	if a := h.attempt("01A", 1); a.State != AttemptSucceeded || a.StartedAt.IsZero() {
		t.Errorf("attempt A = %+v, want succeeded with a start time", a)
	}
	if a := h.attempt("01B", 1); a.State != AttemptRunning {
		t.Errorf("attempt B = %s, want running (the stale report must not touch it)", a.State)
	}
	if j := h.job("01C"); j.State != JobQueued {
		t.Errorf("job C = %s, want queued", j.State)
	}
	checkIndexes(t, h.f)
}

// TestReportBatchMatchesSingles: the same reports give the same records
// whether they come one per entry or in one batch.
func TestReportBatchMatchesSingles(t *testing.T) {
	const n1 = "n1"
	setup := func() (*harness, []ReportAttempt) {
		h := newHarness(t)
		h.addNode(n1)
		h.submit("01A", "01B")
		ta, tb := h.place("01A", n1), h.place("01B", n1)
		return h, []ReportAttempt{
			{JobID: "01A", Attempt: 1, FencingToken: ta, Node: n1, State: AttemptRunning, StartedAt: t0},
			{JobID: "01B", Attempt: 1, FencingToken: tb, Node: n1, State: AttemptFailed, ExitCode: intp(3), FinishedAt: t0},
			{JobID: "01A", Attempt: 1, FencingToken: ta, Node: n1, State: AttemptSucceeded, ExitCode: intp(0), FinishedAt: t0},
		}
	}
	hs, reps := setup()
	for _, r := range reps {
		hs.must(CmdReport, r)
	}
	hb, reps := setup()
	hb.must(CmdReportBatch, ReportAttempts{Reports: reps})
	for _, id := range []string{"01A", "01B"} {
		js, jb := hs.job(id), hb.job(id)
		as, ab := hs.attempt(id, 1), hb.attempt(id, 1)
		as.ModifyIndex, ab.ModifyIndex = 0, 0
		if js.State != jb.State || js.Reason != jb.Reason || as.State != ab.State || !as.FinishedAt.Equal(ab.FinishedAt) {
			t.Errorf("%s: singles %s/%s %+v, batch %s/%s %+v", id, js.State, js.Reason, as, jb.State, jb.Reason, ab)
		}
	}
	checkIndexes(t, hb.f)
}
