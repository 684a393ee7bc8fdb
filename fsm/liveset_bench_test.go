package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkLiveAttemptsPerPlan reads every live attempt, as the scheduler
// does once a plan, after a batch that ended 10 attempts and placed their
// jobs again (so as many are live each time). "set" is Tx.LiveAttemptsShared
// (the live set, patched with the 20 attempts the batch changed); "index"
// reads the live index with its per-attempt decode memo, as every plan did
// before the live set.
func BenchmarkLiveAttemptsPerPlan(b *testing.B) {
	for _, live := range []int{1000, 10000} {
		for _, how := range []string{"index", "set"} {
			b.Run(fmt.Sprintf("live=%d/%s", live, how), func(b *testing.B) {
				h := newHarness(b)
				placed := liveAttemptsBench(b, h, live)
				read := func(tx *Tx) ([]Attempt, error) {
					if how == "index" {
						return (&Tx{tx: tx.tx, live: &h.f.live}).LiveAttemptsShared()
					}
					return tx.LiveAttemptsShared()
				}
				next := 0
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					var logs []*raft.Log
					for range 10 {
						pl := placed[next%len(placed)]
						next++
						var at *Attempt
						if err := h.f.View(func(tx *Tx) (err error) { at, err = tx.Attempt(pl.JobID, lastAttempt(tx, pl.JobID)); return err }); err != nil {
							b.Fatal(err)
						}
						logs = append(logs,
							h.entry(CmdReport, ReportAttempt{JobID: at.JobID, Attempt: at.Num, FencingToken: at.FencingToken, Node: at.Node, State: AttemptFailed, ExitCode: intp(1)}),
							h.entry(CmdRetryJob, RetryJob{JobID: at.JobID}),
							h.entry(CmdPlace, Place{Placements: []Placement{pl}}))
					}
					for i, r := range h.f.ApplyBatch(logs) {
						if res := r.(*Result); res.Err != nil || len(res.Skipped) > 0 {
							b.Fatalf("entry %d: %v %v", i, res.Err, res.Skipped)
						}
					}
					b.StartTimer()
					var n int
					if err := h.f.View(func(tx *Tx) error {
						all, err := read(tx)
						n = len(all)
						return err
					}); err != nil {
						b.Fatal(err)
					}
					if n != live {
						b.Fatalf("%d live attempts, want %d", n, live)
					}
				}
			})
		}
	}
}

// liveAttemptsBench fills h with live attempts on live/20 nodes and
// returns their placements.
func liveAttemptsBench(b *testing.B, h *harness, live int) []Placement {
	b.Helper()
	var logs []*raft.Log
	for i := range live / 20 {
		logs = append(logs, h.entry(CmdUpsertNode, UpsertNode{Node: Node{Name: fmt.Sprintf("node%05d", i), Capacity: Resources{CPU: 4000, MemoryMB: 8192}}}))
	}
	var placed []Placement
	for first := 0; first < live; first += 1000 {
		var sub SubmitJobs
		var pl Place
		for i := first; i < min(first+1000, live); i++ {
			id := jobID(i + 1)
			sub.Jobs = append(sub.Jobs, NewJob{ID: id, Spec: JobSpec{Command: []string{"true"}, MaxAttempts: 1, Resources: Resources{CPU: 10, MemoryMB: 1}}})
			p := Placement{JobID: id, Node: fmt.Sprintf("node%05d", i%(live/20))}
			pl.Placements = append(pl.Placements, p)
			placed = append(placed, p)
		}
		logs = append(logs, h.entry(CmdSubmitJobs, sub), h.entry(CmdPlace, pl))
	}
	for i, r := range h.f.ApplyBatch(logs) {
		if res := r.(*Result); res.Err != nil || len(res.Skipped) > 0 {
			b.Fatalf("entry %d: %v %v", i, res.Err, res.Skipped)
		}
	}
	return placed
}

// lastAttempt is the number of the job's newest attempt.
func lastAttempt(tx *Tx, jobID string) int {
	j, err := tx.Job(jobID)
	if err != nil {
		return 0
	}
	return j.Attempts
}
