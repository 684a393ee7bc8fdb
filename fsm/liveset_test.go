package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// liveFromIndex is every live attempt as tx's transaction holds it, read
// from the index without any memo.
func liveFromIndex(tx *Tx) ([]Attempt, error) {
	return (&Tx{tx: tx.tx}).LiveAttemptsShared()
}

// sameAttempts is reflect.DeepEqual, with no attempts equal to none.
func sameAttempts(a, b []Attempt) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// Views read while attempts are placed, started, finished, cancelled and
// collected get exactly the live attempts their own transaction holds:
// readers compare the live set (the memo, patched or not) with the index
// read directly, in the same transaction, while batches change attempts
// (some views open with a batch's commit in flight).
func TestLiveSetPatchedWhileAttemptsChange(t *testing.T) {
	h := newHarness(t)
	const nodes = 6
	for i := range nodes {
		h.addNode(fmt.Sprintf("n%d", i))
	}
	check := func(tx *Tx) (string, error) {
		got, err := tx.LiveAttemptsShared()
		if err != nil {
			return "", err
		}
		var copied []Attempt
		if err := tx.LiveAttempts(func(a *Attempt) bool { copied = append(copied, *a); return true }); err != nil {
			return "", err
		}
		want, err := liveFromIndex(tx)
		if err != nil || (sameAttempts(got, want) && sameAttempts(copied, want)) {
			return "", err
		}
		return fmt.Sprintf("got %d (%d copied) live attempts, want %d", len(got), len(copied), len(want)), nil
	}
	views := checkViewsWhileWriting(t, h.f, check, func() {
		rng := rand.New(rand.NewPCG(3, 4))
		next := 0
		for b := range 400 {
			var queued []string
			var live []Attempt
			if err := h.f.View(func(tx *Tx) error {
				if err := tx.ForEachJobInState(JobQueued, func(j *Job) bool { queued = append(queued, j.ID); return len(queued) < 20 }); err != nil {
					return err
				}
				var err error
				live, err = liveFromIndex(tx)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var logs []*raft.Log
			var submit SubmitJobs
			for range rng.IntN(4) {
				next++
				submit.Jobs = append(submit.Jobs, NewJob{ID: jobID(next), Spec: JobSpec{Command: []string{"true"}}})
			}
			if len(submit.Jobs) > 0 {
				logs = append(logs, h.entry(CmdSubmitJobs, submit))
			}
			var place Place
			for _, id := range queued[:min(len(queued), rng.IntN(4))] {
				place.Placements = append(place.Placements, Placement{JobID: id, Node: fmt.Sprintf("n%d", rng.IntN(nodes))})
			}
			if len(place.Placements) > 0 {
				logs = append(logs, h.entry(CmdPlace, place))
			}
			for _, a := range live {
				switch rng.IntN(6) {
				case 0:
					logs = append(logs, h.entry(CmdReport, ReportAttempt{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken, Node: a.Node, State: AttemptRunning}))
				case 1:
					logs = append(logs, h.entry(CmdReport, ReportAttempt{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken, Node: a.Node,
						State: []AttemptState{AttemptSucceeded, AttemptFailed}[rng.IntN(2)], ExitCode: intp(rng.IntN(2))}))
				case 2:
					if rng.IntN(4) == 0 {
						logs = append(logs, h.entry(CmdCancelJob, CancelJob{JobID: a.JobID}))
					}
				}
			}
			if b%50 == 49 {
				h.now = h.now.Add(time.Hour)
				logs = append(logs, h.entry(CmdGC, GC{Before: h.now, KeysBefore: h.now}))
			}
			if len(logs) > 0 {
				h.f.ApplyBatch(logs)
			}
		}
	})
	checkIndexes(t, h.f)
	if h.f.lives.patched.Load() == 0 {
		t.Fatalf("no view patched the live set in %d views", views)
	}
	if h.f.lives.resolved.Load() == 0 {
		t.Fatalf("no view opened during a commit in %d views: the version by index is untested", views)
	}
	t.Logf("%d views, %d patched, %d told their version by index", views, h.f.lives.patched.Load(), h.f.lives.resolved.Load())
}

// A caller's change to an attempt LiveAttempts gave it does not reach the
// next reader, and a restore replaces the live set with the snapshot's.
func TestLiveSetCopiesAndRestores(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submit(jobID(1), jobID(2))
	h.place(jobID(1), "n1")
	read := func(f *FSM) []Attempt {
		t.Helper()
		var out []Attempt
		if err := f.View(func(tx *Tx) error {
			return tx.LiveAttempts(func(a *Attempt) bool { out = append(out, *a); return true })
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := h.f.View(func(tx *Tx) error {
		return tx.LiveAttempts(func(a *Attempt) bool { a.Node, a.Resources.CPU = "elsewhere", -1; return true })
	}); err != nil {
		t.Fatal(err)
	}
	if got := read(h.f); len(got) != 1 || got[0].Node != "n1" || got[0].Resources.CPU == -1 {
		t.Fatalf("a caller's change reached the next read: %+v", got)
	}
	snap := snapshotBytes(t, h.f) // one live attempt: job 1's
	h.place(jobID(2), "n1")
	if got := read(h.f); len(got) != 2 {
		t.Fatalf("%d live attempts after the second placement, want 2", len(got))
	}
	if err := h.f.Restore(nopCloser{bytes.NewReader(snap)}); err != nil {
		t.Fatal(err)
	}
	if got := read(h.f); len(got) != 1 || got[0].JobID != jobID(1) {
		t.Fatalf("after the restore: %+v, want only %s's attempt", got, jobID(1))
	}
}
