package fsm

import (
	"errors"
	"testing"
)

// TestReportOutputs: a finish says the upload is pending, a later outputs
// report records where each object is; refused reports change nothing.
func TestReportOutputs(t *testing.T) {
	const j1, n1 = "01J1", "n1"
	h := newHarness(t)
	h.addNode(n1)
	h.submit(j1)
	tok := h.place(j1, n1)
	stored := &Outputs{Store: "s3://b/p", State: OutputsStored, Objects: []StoredObject{
		{Name: OutputArtifact("out.txt"), Key: "p/default/01J1/1/artifacts/out.txt", Size: 3},
		{Name: OutputStdout, Key: "p/default/01J1/1/logs/stdout", Size: 10},
	}}
	// Before the finish: refused (nothing is stored of a running attempt).
	if r := h.apply(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: ReportOutputs, Outputs: stored}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("outputs of a live attempt: %v, want ErrConflict", r.Err)
	}
	h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: AttemptSucceeded, ExitCode: intp(0),
		Outputs: &Outputs{Store: "s3://b/p", State: OutputsPending}})
	if o := h.attempt(j1, 1).Outputs; o == nil || o.State != OutputsPending || o.Store != "s3://b/p" {
		t.Fatalf("after the finish: outputs %+v, want pending", o)
	}
	before := h.hash()
	for name, rep := range map[string]struct {
		r    ReportAttempt
		want error
	}{
		"stale token":   {ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok + 1, Node: n1, State: ReportOutputs, Outputs: stored}, ErrStaleToken},
		"other node":    {ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: "n2", State: ReportOutputs, Outputs: stored}, ErrStaleToken},
		"no outputs":    {ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: ReportOutputs}, ErrBadCommand},
		"pending again": {ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: ReportOutputs, Outputs: &Outputs{Store: "s3://b", State: OutputsPending}}, ErrBadCommand},
		"not s3":        {ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: ReportOutputs, Outputs: &Outputs{Store: "/tmp", State: OutputsStored}}, ErrBadCommand},
		"no attempt":    {ReportAttempt{JobID: j1, Attempt: 2, FencingToken: tok, Node: n1, State: ReportOutputs, Outputs: stored}, ErrNotFound},
	} {
		if r := h.apply(CmdReport, rep.r); !errors.Is(r.Err, rep.want) {
			t.Errorf("%s: %v, want %v", name, r.Err, rep.want)
		}
	}
	if h.hash() != before {
		t.Fatal("a refused outputs report changed the state")
	}
	h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: ReportOutputs, Outputs: stored})
	at := h.attempt(j1, 1)
	if at.State != AttemptSucceeded || at.Outputs.State != OutputsStored || at.Outputs.StoredAt.IsZero() ||
		at.Outputs.Object(OutputStdout).Key != "p/default/01J1/1/logs/stdout" || at.Outputs.Object(OutputStderr) != nil {
		t.Fatalf("after the outputs report: %+v outputs %+v", at, at.Outputs)
	}
	if j := h.job(j1); j.State != JobSucceeded {
		t.Fatalf("job %s, want succeeded (an outputs report does not move the job)", j.State)
	}
	// A partial upload names what was not stored, in the record and the event.
	h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: ReportOutputs,
		Outputs: &Outputs{Store: "s3://b/p", State: OutputsPartial, NotStored: []string{"artifacts/big"}, Error: "connection refused"}})
	if o := h.attempt(j1, 1).Outputs; o.State != OutputsPartial || len(o.NotStored) != 1 {
		t.Fatalf("partial: %+v", o)
	}
	if r := outputsReason(h.attempt(j1, 1).Outputs); r != "1 files not stored in s3://b/p (artifacts/big): connection refused" {
		t.Fatalf("reason %q", r)
	}
}

// A finish whose outputs note is malformed still finishes, with a warning.
func TestFinishBadOutputsNote(t *testing.T) {
	const j1, n1 = "01J1", "n1"
	h := newHarness(t)
	h.addNode(n1)
	h.submit(j1)
	tok := h.place(j1, n1)
	h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: AttemptSucceeded, ExitCode: intp(0),
		Outputs: &Outputs{Store: "s3://b", State: OutputsStored}})
	at := h.attempt(j1, 1)
	if at.State != AttemptSucceeded || at.Outputs != nil || at.Warning == "" {
		t.Fatalf("attempt %+v", at)
	}
}
