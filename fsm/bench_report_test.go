package fsm

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// benchReportEntries submits and places per*rounds jobs (untimed, applied
// to f) and returns the report_batch entries that then finish them: for
// each round, one entry of per "running" reports followed by one of per
// "succeeded" reports, as an executor's batching reporter sends them.
func benchReportEntries(b *testing.B, f *FSM, idx *uint64, rounds, per int) []*raft.Log {
	n := rounds * per
	next := func(typ CommandType, payload any) *raft.Log {
		*idx++
		return rawEntry(*idx, encodeCmd(b, typ, t0, payload))
	}
	p := SubmitJobs{Jobs: make([]NewJob, n)}
	pl := Place{Placements: make([]Placement, n)}
	first := *idx
	for j := range p.Jobs {
		id := fmt.Sprintf("01R%011d%012d", first, j)
		p.Jobs[j] = NewJob{ID: id, IdempotencyKey: "key-" + id, Spec: JobSpec{Name: "bench", Command: []string{"/bin/sh", "-c", "echo hello"},
			Resources: Resources{CPU: 500, MemoryMB: 256}, Priority: 50, Labels: map[string]string{"team": "x"}}}
		pl.Placements[j] = Placement{JobID: id, Node: "n1", Resources: Resources{CPU: 500, MemoryMB: 256}}
	}
	for _, l := range []*raft.Log{next(CmdSubmitJobs, p), next(CmdPlace, pl)} {
		if r := f.Apply(l).(*Result); r.Err != nil || len(r.Skipped) > 0 {
			b.Fatalf("setup: %v %v", r.Err, r.Skipped)
		}
	}
	token := *idx // the place entry's index
	var out []*raft.Log
	for r := range rounds {
		var run, done ReportAttempts
		for j := r * per; j < (r+1)*per; j++ {
			ra := ReportAttempt{JobID: p.Jobs[j].ID, Attempt: 1, FencingToken: token, Node: "n1"}
			ra.State, ra.StartedAt = AttemptRunning, t0
			run.Reports = append(run.Reports, ra)
			ra.State, ra.FinishedAt, ra.ExitCode = AttemptSucceeded, t0.Add(time.Second), intp(0)
			ra.PeakMemoryB, ra.CPUTimeNs = 1<<20, 1e6
			done.Reports = append(done.Reports, ra)
		}
		out = append(out, next(CmdReportBatch, run), next(CmdReportBatch, done))
	}
	return out
}

// BenchmarkApplyReportBatch measures Apply of report_batch entries of 50
// reports, alternating "running" and "succeeded" for the same 50 attempts
// (one bbolt transaction per entry, NoSync as in production): the per-job
// apply cost of a job's life after its placement.
func BenchmarkApplyReportBatch(b *testing.B) {
	const per, rounds = 50, 20
	f, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var idx uint64
	idx++
	f.Apply(rawEntry(idx, encodeCmd(b, CmdUpsertNode, t0, UpsertNode{Node: Node{Name: "n1", Capacity: Resources{CPU: 1 << 40, MemoryMB: 1 << 40}}})))
	var logs []*raft.Log
	n := 0
	var cpu time.Duration
	b.ResetTimer()
	for b.Loop() {
		if len(logs) == 0 {
			b.StopTimer()
			logs = benchReportEntries(b, f, &idx, rounds, per)
			b.StartTimer()
		}
		l := logs[0]
		logs = logs[1:]
		c0 := cpuTime()
		r := f.Apply(l).(*Result)
		cpu += cpuTime() - c0
		if r.Err != nil || len(r.Skipped) > 0 {
			b.Fatalf("report batch: %v %v", r.Err, r.Skipped)
		}
		n++
	}
	b.ReportMetric(float64(n*per)/b.Elapsed().Seconds(), "reports/s")
	b.ReportMetric(float64(n*per)/cpu.Seconds(), "reports/cpu-s")
}
