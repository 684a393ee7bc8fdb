package sched

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// storeFake records deletions.
type storeFake struct {
	loc     string
	deleted chan []string
}

func (s *storeFake) Location() string { return s.loc }
func (s *storeFake) Delete(_ context.Context, keys []string) error {
	s.deleted <- keys
	return nil
}

// The GC deletes the stored outputs of the jobs it drops, and only theirs.
func TestGCDeletesStoredOutputs(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)})
	finish := func(id string, keys ...string) {
		e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: id, Spec: fsm.JobSpec{Command: []string{"true"}, MaxAttempts: 1}}}})
		e.apply(fsm.CmdPlace, &fsm.Place{Placements: []fsm.Placement{{JobID: id, Node: "n1"}}})
		a := e.attempt(id, 1)
		e.apply(fsm.CmdReport, &fsm.ReportAttempt{JobID: id, Attempt: 1, FencingToken: a.FencingToken, Node: "n1", State: fsm.AttemptSucceeded,
			Outputs: &fsm.Outputs{Store: "s3://b/p", State: fsm.OutputsPending}})
		var objs []fsm.StoredObject
		for _, k := range keys {
			objs = append(objs, fsm.StoredObject{Name: "artifacts/" + k, Key: k})
		}
		e.apply(fsm.CmdReport, &fsm.ReportAttempt{JobID: id, Attempt: 1, FencingToken: a.FencingToken, Node: "n1", State: fsm.ReportOutputs,
			Outputs: &fsm.Outputs{Store: "s3://b/p", State: fsm.OutputsStored, Objects: objs}})
	}
	finish("old", "p/default/old/1/a", "p/default/old/1/b")
	e.clk.Advance(2 * time.Hour)
	finish("new", "p/default/new/1/a")
	st := &storeFake{loc: "s3://b/p", deleted: make(chan []string, 1)}
	cfg := loopConfig()
	cfg.Retention = time.Hour
	s, err := New(cfg, Deps{Raft: e.r, State: e.f, Clock: e.clk, Outputs: st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.gc(context.Background(), e.clk.Now())
	select {
	case keys := <-st.deleted:
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"p/default/old/1/a", "p/default/old/1/b"}) {
			t.Fatalf("deleted %v, want old's two objects", keys)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing deleted")
	}
	if err := e.f.View(func(tx *fsm.Tx) error { _, err := tx.Job("old"); return err }); err == nil {
		t.Fatal("job old not dropped by the GC")
	}
	if j := e.job("new"); j == nil || j.State != fsm.JobSucceeded {
		t.Fatalf("job new: %+v", j)
	}
}
