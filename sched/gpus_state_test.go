package sched

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

type gpuSink struct{ bytes.Buffer }

func (s *gpuSink) ID() string    { return "mem" }
func (s *gpuSink) Cancel() error { return nil }
func (s *gpuSink) Close() error  { return nil }

// planAndApply plans on f's state and applies the plan's commands.
func planAndApply(t *testing.T, r *fakeRaft) {
	t.Helper()
	var d *Decision
	if err := r.f.View(func(tx *fsm.Tx) error {
		snap, err := LoadSnapshot(tx, t0)
		if err != nil {
			return err
		}
		d = Plan(snap, t0, testConfig())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Commands {
		if res, err := r.Apply(context.Background(), c); err != nil || res.Err != nil || len(res.Skipped) > 0 {
			t.Fatalf("apply %s: %v %v skipped %v", c.Type, err, res.Err, res.Skipped)
		}
	}
}

func attemptGPUIndexes(t *testing.T, f *fsm.FSM, job string, num int) []int {
	t.Helper()
	var out []int
	if err := f.View(func(tx *fsm.Tx) error {
		a, err := tx.Attempt(job, num)
		if err != nil {
			return err
		}
		for _, g := range a.GPUs {
			out = append(out, g.Index)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The leader's pick goes into the Place entry, so it is in every replica's
// state and survives a snapshot and restore; a plan on the restored state
// picks exactly what one on the original does.
func TestGPUAssignmentSurvivesRestore(t *testing.T) {
	open := func() *fakeRaft {
		f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return &fakeRaft{t: t, f: f}
	}
	r := open()
	apply := func(r *fakeRaft, typ fsm.CommandType, payload any) {
		t.Helper()
		cmd, err := fsm.NewCommand(typ, t0, payload)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := r.Apply(context.Background(), cmd); err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
	}
	apply(r, fsm.CmdUpsertNode, &fsm.UpsertNode{Node: gpuNode("g1", 8)})
	spec := fsm.JobSpec{Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 1000, MemoryMB: 512, Named: map[string]int64{"gpu": 4}}}
	apply(r, fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "a", Spec: spec}, {ID: "b", Spec: spec}}})
	planAndApply(t, r)
	a, b := attemptGPUIndexes(t, r.f, "a", 1), attemptGPUIndexes(t, r.f, "b", 1)
	if !slices.Equal(a, []int{0, 1, 4, 5}) || !slices.Equal(b, []int{2, 3, 6, 7}) {
		t.Fatalf("a got %v, b got %v: want the two NVLink islands", a, b)
	}

	snap, err := r.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink gpuSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	r2 := open()
	if err := r2.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	r2.index = r.index
	if a2, b2 := attemptGPUIndexes(t, r2.f, "a", 1), attemptGPUIndexes(t, r2.f, "b", 1); !slices.Equal(a2, a) || !slices.Equal(b2, b) {
		t.Fatalf("restored: a %v b %v", a2, b2)
	}

	// a ends, which frees its devices; the same next entries on both give
	// the same state and the same pick for a new 2-GPU job.
	code := 0
	for _, x := range []*fakeRaft{r, r2} {
		var tok uint64
		_ = x.f.View(func(tx *fsm.Tx) error { at, err := tx.Attempt("a", 1); tok = at.FencingToken; return err })
		apply(x, fsm.CmdReport, &fsm.ReportAttempt{JobID: "a", Attempt: 1, FencingToken: tok, Node: "g1", State: fsm.AttemptSucceeded, ExitCode: &code})
		apply(x, fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "c", Spec: fsm.JobSpec{Command: []string{"true"}, Priority: 50,
			Resources: fsm.Resources{CPU: 1000, MemoryMB: 512, Named: map[string]int64{"gpu": 2}}}}}})
		planAndApply(t, x)
	}
	c1, c2 := attemptGPUIndexes(t, r.f, "c", 1), attemptGPUIndexes(t, r2.f, "c", 1)
	if !slices.Equal(c1, []int{0, 1}) || !reflect.DeepEqual(c1, c2) {
		t.Fatalf("after a ended: original picked %v, restored %v; want [0 1] on both", c1, c2)
	}
	_, h1, _ := r.f.StateHash()
	_, h2, _ := r2.f.StateHash()
	if h1 != h2 {
		t.Fatalf("state hashes differ after the same entries: %s vs %s", h1, h2)
	}
}
