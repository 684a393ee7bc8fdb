package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// checkSchedIndexes verifies jobs_by_due, queued_by_group and jobs_by_finish hold exactly
// the entries the job records call for (checkIndexes calls it).
func checkSchedIndexes(t testing.TB, f *FSM) {
	t.Helper()
	err := f.View(func(tx *Tx) error {
		wantDue, wantQueued, wantFinish := map[string]bool{}, map[string]bool{}, map[string]bool{}
		if err := tx.tx.Bucket(bucketJobs).ForEach(func(_, v []byte) error {
			var j Job
			if err := decode(v, &j); err != nil {
				return err
			}
			if due, ok := dueTime(&j); ok {
				wantDue[string(dueKey(due, j.ID))] = true
			}
			if j.State == JobQueued {
				wantQueued[string(queuedKey(&j))] = true
			}
			if j.State.Terminal() {
				wantFinish[string(dueKey(j.FinishedAt, j.ID))] = true
			}
			return nil
		}); err != nil {
			return err
		}
		for _, c := range []struct {
			bucket []byte
			want   map[string]bool
		}{{bucketJobsByDue, wantDue}, {bucketQueuedByGroup, wantQueued}, {bucketJobsByFinish, wantFinish}} {
			n := 0
			if err := tx.tx.Bucket(c.bucket).ForEach(func(k, _ []byte) error {
				n++
				if !c.want[string(k)] {
					return fmt.Errorf("%s: stray entry %x", c.bucket, k)
				}
				return nil
			}); err != nil {
				return err
			}
			if n != len(c.want) {
				return fmt.Errorf("%s: %d entries, want %d", c.bucket, n, len(c.want))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scheduler indexes inconsistent: %v", err)
	}
}

// dueIDs lists the jobs ForEachDueJob returns at now, and the next due time.
func (h *harness) dueIDs(now time.Time) ([]string, time.Time) {
	h.t.Helper()
	var ids []string
	var next time.Time
	err := h.f.View(func(tx *Tx) (err error) {
		next, err = tx.ForEachDueJob(now, func(j *Job) bool { ids = append(ids, j.ID); return true })
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return ids, next
}

// queuedRuns lists each run's job IDs in run order.
func (h *harness) queuedRuns() [][]string {
	h.t.Helper()
	var out [][]string
	err := h.f.View(func(tx *Tx) error {
		runs, err := tx.QueuedRuns()
		if err != nil {
			return err
		}
		for _, r := range runs {
			var ids []string
			for _, id, ok := r.Head(); ok; _, id, ok = r.Head() {
				j, err := r.Job()
				if err != nil {
					return err
				}
				if j.ID != id || j.State != JobQueued || j.Spec.Priority != r.Priority() || PlacementGroup(&j.Spec) != r.Group() {
					return fmt.Errorf("run %x/%d yields %+v", r.Group(), r.Priority(), j)
				}
				ids = append(ids, id)
				r.Advance()
			}
			out = append(out, ids)
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func TestSchedIndexLifecycle(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	runAt := t0.Add(time.Hour)
	deadline := t0.Add(2 * time.Hour)
	early := t0.Add(30 * time.Minute)
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{
		{ID: "a-queued", Spec: JobSpec{Command: []string{"true"}, Priority: 50}},
		{ID: "b-runat", Spec: JobSpec{Command: []string{"true"}, Priority: 50, RunAt: &runAt}},
		{ID: "c-runat-deadline", Spec: JobSpec{Command: []string{"true"}, Priority: 50, RunAt: &runAt, Deadline: &deadline}},
		{ID: "d-queued-deadline", Spec: JobSpec{Command: []string{"true"}, Priority: 50, Deadline: &early}},
		{ID: "e-prio", Spec: JobSpec{Command: []string{"true"}, Priority: 90}},
		{ID: "f-big", Spec: JobSpec{Command: []string{"true"}, Priority: 50, Resources: Resources{CPU: 8000}}},
		{ID: "g-retry", Spec: JobSpec{Command: []string{"true"}, Priority: 50, MaxAttempts: 3,
			Backoff: Backoff{Initial: Duration(time.Minute), Multiplier: 1}}},
	}})
	checkIndexes(t, h.f)
	ids, next := h.dueIDs(t0)
	if len(ids) != 0 || !next.Equal(early) {
		t.Fatalf("at t0: due %v next %v, want none and %v", ids, next, early)
	}
	ids, next = h.dueIDs(runAt)
	if want := []string{"d-queued-deadline", "b-runat", "c-runat-deadline"}; !slices.Equal(ids, want) || !next.IsZero() {
		t.Fatalf("at run_at: due %v next %v, want %v and none", ids, next, want)
	}
	// One run per (group, priority): a/d/g share one, e and f have their own.
	runs := h.queuedRuns()
	if len(runs) != 3 {
		t.Fatalf("runs %v, want 3", runs)
	}
	for _, r := range runs {
		if len(r) == 3 && !slices.Equal(r, []string{"a-queued", "d-queued-deadline", "g-retry"}) {
			t.Fatalf("run %v not in submit order", r)
		}
	}

	// Release at run_at: b leaves the due index, c's entry moves to its deadline.
	h.now = runAt
	h.must(CmdRelease, ReleaseJobs{JobIDs: []string{"b-runat", "c-runat-deadline"}})
	checkIndexes(t, h.f)
	if ids, next := h.dueIDs(runAt); !slices.Equal(ids, []string{"d-queued-deadline"}) || !next.Equal(deadline) {
		t.Fatalf("after release: due %v next %v", ids, next)
	}
	// Deadline failure, placement, a failed attempt (retrying, due at its
	// backoff), release again, cancel, retry of the cancelled job, GC.
	h.must(CmdFailJobs, FailJobs{JobIDs: []string{"d-queued-deadline"}, Reason: ReasonDeadline})
	checkIndexes(t, h.f)
	tok := h.place("g-retry", "n1")
	checkIndexes(t, h.f)
	code := 1
	h.must(CmdReport, ReportAttempt{JobID: "g-retry", Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptFailed, ExitCode: &code})
	checkIndexes(t, h.f)
	g := h.job("g-retry")
	if g.State != JobRetrying {
		t.Fatalf("g is %s", g.State)
	}
	if ids, next := h.dueIDs(runAt); len(ids) != 0 || !next.Equal(g.NextRunAt) {
		t.Fatalf("retrying: due %v next %v, want next %v", ids, next, g.NextRunAt)
	}
	h.now = g.NextRunAt
	h.must(CmdRelease, ReleaseJobs{JobIDs: []string{"g-retry"}})
	checkIndexes(t, h.f)
	h.must(CmdCancelJob, CancelJob{JobID: "a-queued"})
	h.must(CmdCancelJob, CancelJob{JobID: "c-runat-deadline"})
	checkIndexes(t, h.f)
	h.must(CmdRetryJob, RetryJob{JobID: "a-queued"})
	checkIndexes(t, h.f)
	h.must(CmdCancelJob, CancelJob{JobID: "a-queued"})
	h.now = h.now.Add(time.Hour)
	h.must(CmdGC, GC{Before: h.now})
	checkIndexes(t, h.f)
	if ids, next := h.dueIDs(h.now.Add(1000 * time.Hour)); len(ids) != 0 || !next.IsZero() {
		t.Fatalf("after GC: due %v next %v, want none", ids, next)
	}
}

// A file written before the indexes existed (or a restored old snapshot)
// gets them rebuilt at Open, identical to the ones Apply maintains, so
// StateHash agrees with nodes that never lacked them.
func TestSchedIndexRebuiltAtOpen(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	rng := rand.New(rand.NewPCG(5, 6))
	var p SubmitJobs
	for i := range 300 {
		spec := JobSpec{Command: []string{"true"}, Priority: rng.IntN(4) * 30, Queue: []string{"", "q"}[rng.IntN(2)],
			Resources: Resources{CPU: int64(rng.IntN(3)) * 100}}
		if rng.IntN(3) == 0 {
			rt := t0.Add(time.Duration(rng.IntN(100)) * time.Minute)
			spec.RunAt = &rt
		}
		if rng.IntN(4) == 0 {
			dl := t0.Add(time.Duration(rng.IntN(100)) * time.Minute)
			spec.Deadline = &dl
		}
		p.Jobs = append(p.Jobs, NewJob{ID: jobID(i), Spec: spec})
	}
	h.now = t0.Add(-time.Minute)
	h.must(CmdSubmitJobs, p)
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "placed", Spec: JobSpec{Command: []string{"true"}}},
		{ID: "cancelled", Spec: JobSpec{Command: []string{"true"}}}}})
	h.place("placed", "n1")
	h.must(CmdCancelJob, CancelJob{JobID: "cancelled"})
	want := h.hash()
	data := snapshotBytes(t, h.f)

	// Drop the indexes from the file, as an older binary would have written it.
	path := h.f.Path()
	if err := h.f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketJobsByDue); err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketJobsByFinish); err != nil {
			return err
		}
		return tx.DeleteBucket(bucketQueuedByGroup)
	}); err != nil {
		t.Fatal(err)
	}
	var old bytes.Buffer
	if err := db.View(func(tx *bolt.Tx) error { _, err := tx.WriteTo(&old); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if h.f, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if got := h.hash(); got != want {
		t.Fatalf("hash after rebuild differs")
	}
	checkIndexes(t, h.f)

	// Restoring the old-layout snapshot rebuilds them too.
	r := newHarness(t)
	if err := r.f.Restore(nopCloser{bytes.NewReader(old.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if got := r.hash(); got != want {
		t.Fatalf("hash after restoring an old snapshot differs")
	}
	checkIndexes(t, r.f)
	// And a current snapshot restores as is.
	if err := r.f.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if got := r.hash(); got != want {
		t.Fatalf("hash after restoring a snapshot differs")
	}
}

// A schema 1 file (JSON records) from before the indexes existed opens:
// the records are migrated first and the indexes are built from them.
func TestSchedIndexBuiltAfterV1Upgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	runAt := t0.Add(time.Hour)
	jobs := []Job{
		{ID: "01A", State: JobWaiting, NextRunAt: runAt, SubmittedAt: t0, Spec: JobSpec{Command: []string{"true"}, RunAt: &runAt}},
		{ID: "01B", State: JobQueued, SubmittedAt: t0, Spec: JobSpec{Command: []string{"true"}, Priority: 50}},
		{ID: "01C", State: JobSucceeded, SubmittedAt: t0, FinishedAt: t0, Spec: JobSpec{Command: []string{"true"}}},
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketJobs, bucketJobsByState, bucketAttempts,
			bucketLiveByNode, bucketNodes, bucketIdempotency, bucketQueues} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMeta).Put(metaSchemaVersion, []byte("1")); err != nil {
			return err
		}
		for _, j := range jobs {
			v, err := json.Marshal(j)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketJobs).Put([]byte(j.ID), v); err != nil {
				return err
			}
			if err := tx.Bucket(bucketJobsByState).Put(jobStateKey(j.State, j.ID), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("open a schema 1 file without the indexes: %v", err)
	}
	defer f.Close()
	checkIndexes(t, f)
	h := &harness{t: t, f: f, now: t0}
	if ids, next := h.dueIDs(t0); len(ids) != 0 || !next.Equal(runAt) {
		t.Fatalf("due %v next %v, want the waiting job's run_at %v", ids, next, runAt)
	}
	if runs := h.queuedRuns(); len(runs) != 1 || !slices.Equal(runs[0], []string{"01B"}) {
		t.Fatalf("queued runs %v", runs)
	}
}
