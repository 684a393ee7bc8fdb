package exec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestJobResultAndInputs: a job's result file reaches its report (cut at
// fsm.ResultMax, with truncated set), a symlink is not followed, and the
// parents' results are there for a child under $FOREMAN_INPUTS.
func TestJobResultAndInputs(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))

	state.assign("res-small", fsm.JobSpec{Command: sh(`printf 'rows=42' > "$FOREMAN_RESULT"`)})
	if r := h.waitFinal(t, "res-small", waitShort); r.State != fsm.AttemptSucceeded || string(r.Result) != "rows=42" || r.ResultTruncated {
		t.Fatalf("small result: %s %q truncated=%v (%s)", r.State, r.Result, r.ResultTruncated, r.Reason)
	}
	state.assign("res-big", fsm.JobSpec{Command: sh(`head -c 70000 /dev/zero | tr '\0' x > "$FOREMAN_RESULT"`)})
	if r := h.waitFinal(t, "res-big", waitShort); r.State != fsm.AttemptSucceeded || len(r.Result) != fsm.ResultMax || !r.ResultTruncated {
		t.Fatalf("big result: %s %d bytes truncated=%v", r.State, len(r.Result), r.ResultTruncated)
	}
	state.assign("res-link", fsm.JobSpec{Command: sh(`rm -f "$FOREMAN_RESULT"; ln -s /etc/passwd "$FOREMAN_RESULT"`)})
	if r := h.waitFinal(t, "res-link", waitShort); r.State != fsm.AttemptSucceeded || len(r.Result) != 0 {
		t.Fatalf("symlinked result: %s %q", r.State, r.Result)
	}
	state.assign("res-none", fsm.JobSpec{Command: []string{"true"}})
	if r := h.waitFinal(t, "res-none", waitShort); r.State != fsm.AttemptSucceeded || r.Result != nil {
		t.Fatalf("no result: %s %q", r.State, r.Result)
	}

	state.assign("res-child", fsm.JobSpec{Command: sh(`cat "$FOREMAN_INPUTS/extract/result" "$FOREMAN_INPUTS/other/result" > "$FOREMAN_RESULT"; ls "$FOREMAN_INPUTS"`)},
		func(a *Assignment) {
			a.Inputs = []Input{{Name: "extract", Result: []byte("a=1\n")}, {Name: "other", Result: []byte("b=2\n")}, {Name: "../evil", Result: []byte("x")}}
		})
	r := h.waitFinal(t, "res-child", waitShort)
	if r.State != fsm.AttemptSucceeded || string(r.Result) != "a=1\nb=2\n" {
		t.Fatalf("child: %s %q (%s)", r.State, r.Result, r.StderrTail)
	}
	var out bytes.Buffer
	if err := h.w.StreamLog(t.Context(), "res-child", 1, "stdout", false, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out.String()); strings.Join(got, " ") != "extract other" {
		t.Fatalf("inputs dir holds %q", got)
	}
}
