package checker

import (
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	jobs := []FinalJob{
		{ID: "a", State: "succeeded", Attempts: []FinalAttempt{{Attempt: 1, State: "lost"}, {Attempt: 2, State: "succeeded"}}},
		{ID: "b", State: "failed", Attempts: []FinalAttempt{{Attempt: 1, State: "killed", Reason: "fenced"}}},
		{ID: "c", State: "cancelled"}, // cancelled while queued: no attempt
	}
	running := append(jobs[:3:3], FinalJob{ID: "d", State: "running", Attempts: []FinalAttempt{{Attempt: 1, State: "running"}}})
	for _, tc := range []struct {
		name     string
		final    []FinalJob
		u        UsageReading
		valid    bool
		mismatch int
		msg      string
	}{
		{"equal", jobs, UsageReading{Enabled: true, Attempts: 3}, true, 0, ""},
		{"an end counted twice", jobs, UsageReading{Enabled: true, Attempts: 4}, false, 1, "usage counts 4 attempts, the jobs show 3 ended (+1)"},
		{"an end lost", jobs, UsageReading{Enabled: true, Attempts: 2}, false, -1, "usage counts 2 attempts, the jobs show 3 ended (-1)"},
		{"not on", jobs, UsageReading{}, false, 0, "usage accounting was not on"},
		{"unreadable", jobs, UsageReading{Enabled: true, Err: "http 503"}, false, 0, "usage report: http 503"},
		{"live attempts: no verdict", running, UsageReading{Enabled: true, Attempts: 9}, true, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Usage(tc.final, tc.u)
			if r.Valid != tc.valid || r.Stats["usage_mismatch"] != tc.mismatch {
				t.Fatalf("valid %v mismatch %d, want %v %d: %v", r.Valid, r.Stats["usage_mismatch"], tc.valid, tc.mismatch, r)
			}
			if tc.msg != "" && (len(r.Errors) != 1 || !strings.Contains(r.Errors[0], tc.msg)) {
				t.Fatalf("errors %q, want one containing %q", r.Errors, tc.msg)
			}
			if r.Stats["ended_attempts"] != 3 {
				t.Fatalf("ended_attempts %d, want 3", r.Stats["ended_attempts"])
			}
		})
	}
}
