package cluster

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
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

// Every append that reaches raft.db through the log cache (the store raft
// is given) is counted once: the cache passes StoreLog and StoreLogs
// through to raftBolt, which counts around raft-boltdb's commit.
func TestRaftLogMetricsCountEachAppendOnce(t *testing.T) {
	s, err := openRaftStorage(t.TempDir(), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	RegisterMetrics()
	read := func() (appends, entries, bytes float64) {
		return gatheredCounter(t, "foreman_raft_log_appends_total"), gatheredCounter(t, "foreman_raft_log_entries_total"),
			gatheredCounter(t, "foreman_raft_log_bytes_total")
	}
	entry := func(idx uint64, size int) *raft.Log {
		return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{'x'}, size)}
	}
	for _, tc := range []struct {
		name                  string
		store                 func() error
		appends, entries, len float64
	}{
		{"batch of three", func() error {
			return s.logs.StoreLogs([]*raft.Log{entry(1, 100), entry(2, 0), entry(3, 5000)})
		}, 1, 3, 5100},
		{"single entry", func() error { return s.logs.StoreLog(entry(4, 42)) }, 1, 1, 42},
		{"bolt store directly", func() error { return s.bolt.StoreLog(entry(5, 7)) }, 1, 1, 7},
		{"barrier without data", func() error {
			return s.logs.StoreLogs([]*raft.Log{{Index: 6, Term: 1, Type: raft.LogBarrier}})
		}, 1, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a0, e0, b0 := read()
			if err := tc.store(); err != nil {
				t.Fatal(err)
			}
			a1, e1, b1 := read()
			if a1-a0 != tc.appends || e1-e0 != tc.entries || b1-b0 != tc.len {
				t.Errorf("appends +%v entries +%v bytes +%v, want +%v +%v +%v",
					a1-a0, e1-e0, b1-b0, tc.appends, tc.entries, tc.len)
			}
		})
	}
	// A failed append (here: the store is closed) is not counted.
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	a0, _, _ := read()
	if err := s.logs.StoreLog(entry(7, 1)); err == nil {
		t.Fatal("StoreLog on a closed store succeeded")
	}
	if a1, _, _ := read(); a1 != a0 {
		t.Errorf("a failed append counted: appends +%v", a1-a0)
	}
}
