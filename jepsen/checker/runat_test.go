package checker

import (
	"testing"
	"time"
)

func TestRunAt(t *testing.T) {
	s := int64(time.Second)
	final := []FinalJob{{ID: "j1", IdempotencyKey: "k1"}, {ID: "j2", IdempotencyKey: "k2"}, {ID: "j3", IdempotencyKey: "k3"}}
	runAt := map[string]int64{"k1": 10 * s, "k2": 10 * s}
	exec := []Record{
		{Kind: "start", Job: "j1", Attempt: 1, At: 10*s + s/2}, // half a second late
		{Kind: "start", Job: "j2", Attempt: 1, At: 7 * s},      // 3 s early
		{Kind: "start", Job: "j2", Attempt: 2, At: 12 * s},
		{Kind: "start", Job: "j3", Attempt: 1, At: 0}, // not delayed
	}
	tests := []struct {
		name       string
		ahead      time.Duration
		valid      bool
		withinSkew int
	}{
		{"no skew: early is a violation", 0, false, 0},
		{"skew smaller than the early start", 2 * time.Second, false, 0},
		{"early within the skew applied", 5 * time.Second, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := RunAt(exec, final, runAt, RunAtOptions{Ahead: tc.ahead, ClockBound: time.Millisecond})
			if r.Valid != tc.valid || r.Stats["early_within_skew"] != tc.withinSkew {
				t.Fatalf("valid=%v stats=%v errors=%v", r.Valid, r.Stats, r.Errors)
			}
			if r.Stats["delayed"] != 2 || r.Stats["max_late_ms"] != 500 {
				t.Fatalf("stats %v", r.Stats)
			}
		})
	}
}
