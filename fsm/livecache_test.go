package fsm

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestLiveAttemptsCache: repeated scans of the live index return what the
// state holds after every change (a memo keyed by the stored bytes), each
// caller gets its own copy, and an early stop does not lose the rest.
func TestLiveAttemptsCache(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submit("01A", "01B", "01C")
	tokA := h.place("01A", "n1")
	h.place("01B", "n1")
	h.place("01C", "n1")
	scan := func(stopAfter int) map[string]Attempt {
		out := map[string]Attempt{}
		if err := h.f.View(func(tx *Tx) error {
			return tx.LiveAttemptsOnNode("n1", func(a *Attempt) bool {
				out[a.JobID] = *a
				a.State, a.Resources.Named = "scribbled", map[string]int64{"x": 1} // must not reach the cache
				return stopAfter == 0 || len(out) < stopAfter
			})
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for i := 0; i < 2; i++ { // cold, then cached
		got := scan(0)
		if len(got) != 3 || got["01A"].State != AttemptAssigned || got["01A"].Resources.Named != nil {
			t.Fatalf("scan %d = %+v", i, got)
		}
	}
	if got := scan(1); len(got) != 1 {
		t.Fatalf("early stop: %d attempts", len(got))
	}
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h.must(CmdReport, ReportAttempt{JobID: "01A", Attempt: 1, FencingToken: tokA, Node: "n1", State: AttemptRunning, StartedAt: started})
	got := scan(0)
	if a := got["01A"]; a.State != AttemptRunning || !a.StartedAt.Equal(started) {
		t.Fatalf("after the running report: %+v", a)
	}
	if got["01B"].State != AttemptAssigned {
		t.Fatalf("01B = %+v", got["01B"])
	}
	code := 0
	h.must(CmdReport, ReportAttempt{JobID: "01A", Attempt: 1, FencingToken: tokA, Node: "n1", State: AttemptSucceeded, ExitCode: &code})
	if got := scan(0); len(got) != 2 || got["01A"].JobID != "" {
		t.Fatalf("after the final report: %+v", got)
	}
	checkIndexes(t, h.f)
}

// BenchmarkLiveAttemptsOnNode: one worker reconcile's read of 2,000 queued
// attempts, unchanged between scans (the common case), with the cache and
// decoding every record as before it.
func BenchmarkLiveAttemptsOnNode(b *testing.B) {
	h := newHarness(b)
	h.addNode("n1")
	const n = 2000
	var ps []Placement
	for i := 0; i < n; i++ {
		h.submit(jobID(i))
		ps = append(ps, Placement{JobID: jobID(i), Node: "n1"})
	}
	h.must(CmdPlace, Place{Placements: ps})
	for _, cached := range []bool{true, false} {
		name := map[bool]string{true: "cached", false: "decode"}[cached]
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c := 0
				h.f.db.View(func(btx *bolt.Tx) error {
					tx := &Tx{tx: btx}
					if cached {
						tx.live = &h.f.live
					}
					return tx.LiveAttemptsOnNode("n1", func(a *Attempt) bool { c++; return true })
				})
				if c != n {
					b.Fatalf("%d live", c)
				}
			}
		})
	}
}
