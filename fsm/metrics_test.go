package fsm

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// gatheredCounter reads a counter as GET /v1/metrics serves it (the
// default registry).
func gatheredCounter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("counter %s is not registered", name)
	return 0
}

// One applied batch is one state commit, a batch re-run after a refusal
// (the first try rolled back) too; the bytes are what bbolt's own stats
// say the commits allocated, plus one meta page each.
func TestStateCommitMetrics(t *testing.T) {
	RegisterMetrics()
	h := newHarness(t)
	h.addNode("n1")
	pageSize := h.f.db.Info().PageSize
	submit := func(i int) *raftLog {
		h.idx++
		return rawEntry(h.idx, encodeCmd(t, CmdSubmitJobs, t0, SubmitJobs{Jobs: []NewJob{{ID: jobID(i), IdempotencyKey: jobID(i)}}}))
	}
	for _, tc := range []struct {
		name    string
		batch   func() []*raftLog
		commits float64
	}{
		{"one entry", func() []*raftLog { return []*raftLog{submit(1)} }, 1},
		{"batch of three", func() []*raftLog { return []*raftLog{submit(2), submit(3), submit(4)} }, 1},
		{"batch re-run after a partial write", func() []*raftLog {
			logs := []*raftLog{submit(5), submit(6)}
			bad := logs[1].Index
			h.f.faultHook = func(idx uint64) error {
				if idx == bad {
					return ErrConflict
				}
				return nil
			}
			return logs
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() { h.f.faultHook = nil }()
			logs := tc.batch()
			c0, b0 := gatheredCounter(t, "foreman_state_commits_total"), gatheredCounter(t, "foreman_state_written_bytes_total")
			s0 := h.f.db.Stats().TxStats
			h.f.ApplyBatch(logs)
			c1, b1 := gatheredCounter(t, "foreman_state_commits_total"), gatheredCounter(t, "foreman_state_written_bytes_total")
			s1 := h.f.db.Stats().TxStats
			alloc := s1.GetPageAlloc() - s0.GetPageAlloc() // the rolled-back try's too
			if c1-c0 != tc.commits {
				t.Errorf("commits +%v, want +%v", c1-c0, tc.commits)
			}
			// A rolled-back try allocates nothing (pages are allocated
			// in Commit), so the bytes are exact either way.
			if want := float64(alloc) + tc.commits*float64(pageSize); b1-b0 != want || b1-b0 < 2*float64(pageSize) {
				t.Errorf("written bytes +%v, want %v (%d allocated + %v meta pages of %d), at least a changed page and the meta page",
					b1-b0, want, alloc, tc.commits, pageSize)
			}
		})
	}
}
