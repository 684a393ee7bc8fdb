package fsm

import (
	"errors"
	"testing"
	"time"
)

// TestIdempotentSubmit: a key seen before returns the original job ID as a
// duplicate, inside one entry and across entries, until GC expires it.
func TestIdempotentSubmit(t *testing.T) {
	h := newHarness(t)
	r := h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{
		{ID: "01A", IdempotencyKey: "k1"},
		{ID: "01B", IdempotencyKey: "k1"}, // same key in the same entry
		{ID: "01C"},
	}})
	want := []SubmitResult{{ID: "01A"}, {ID: "01A", Duplicate: true}, {ID: "01C"}}
	if len(r.Jobs) != len(want) {
		t.Fatalf("results %+v", r.Jobs)
	}
	for i := range want {
		if r.Jobs[i] != want[i] {
			t.Errorf("job %d: %+v, want %+v", i, r.Jobs[i], want[i])
		}
	}
	// A client retry with a fresh leader-stamped ID.
	h.now = t0.Add(time.Hour)
	r = h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "01D", IdempotencyKey: "k1"}}})
	if r.Jobs[0] != (SubmitResult{ID: "01A", Duplicate: true}) {
		t.Errorf("retry: %+v", r.Jobs[0])
	}
	// A re-sent command (same ID) is a duplicate too, never an overwrite.
	r = h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "01C", Spec: JobSpec{Name: "changed"}}}})
	if !r.Jobs[0].Duplicate || h.job("01C").Spec.Name != "" {
		t.Errorf("re-sent ID: %+v, name %q", r.Jobs[0], h.job("01C").Spec.Name)
	}
	if err := h.f.View(func(tx *Tx) error {
		if _, err := tx.Job("01B"); !errors.Is(err, ErrNotFound) {
			t.Errorf("duplicate created job 01B")
		}
		if id, ok := tx.JobIDByIdempotencyKey("k1"); !ok || id != "01A" {
			t.Errorf("key k1 → %q %v", id, ok)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// GC with a key cutoff before the record keeps it; after it drops it.
	h.must(CmdGC, GC{KeysBefore: t0})
	if _, ok := keyJob(h, "k1"); !ok {
		t.Fatalf("key expired too early")
	}
	h.must(CmdGC, GC{KeysBefore: t0.Add(time.Second)})
	if _, ok := keyJob(h, "k1"); ok {
		t.Fatalf("key not expired by GC")
	}
	r = h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "01E", IdempotencyKey: "k1"}}})
	if r.Jobs[0] != (SubmitResult{ID: "01E"}) {
		t.Errorf("after expiry: %+v", r.Jobs[0])
	}
}

func keyJob(h *harness, key string) (id string, ok bool) {
	_ = h.f.View(func(tx *Tx) error { id, ok = tx.JobIDByIdempotencyKey(key); return nil })
	return id, ok
}

// TestGCJobs drops only terminal jobs finished before the cutoff, with
// their attempts and index entries.
func TestGCJobs(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submit("01A", "01B", "01C")
	tok := h.place("01A", "n1")
	h.must(CmdReport, ReportAttempt{JobID: "01A", Attempt: 1, FencingToken: tok, State: AttemptSucceeded})
	h.now = t0.Add(time.Hour)
	h.must(CmdCancelJob, CancelJob{JobID: "01B"}) // finished later
	h.must(CmdGC, GC{Before: t0.Add(time.Minute)})
	err := h.f.View(func(tx *Tx) error {
		if _, err := tx.Job("01A"); !errors.Is(err, ErrNotFound) {
			t.Errorf("old succeeded job kept")
		}
		if as, _ := tx.Attempts("01A"); len(as) != 0 {
			t.Errorf("attempts of a dropped job kept: %v", as)
		}
		for _, id := range []string{"01B", "01C"} {
			if _, err := tx.Job(id); err != nil {
				t.Errorf("job %s dropped: %v", id, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, h.f)
}
