package report

import (
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/jepsen/history"
)

func TestWindowsAndFirstWrite(t *testing.T) {
	s := int64(time.Second)
	ops := []history.Op{
		{Kind: history.Submit, Call: 0, Return: s / 2, Outcome: history.OK},
		{Kind: history.Submit, Call: 2 * s, Return: 3 * s, Outcome: history.Info},
		{Kind: history.Submit, Call: 3 * s, Return: 4 * s, Outcome: history.OK},
		{Kind: history.Read, Call: 5 * s, Return: 5 * s, Outcome: history.OK},
		{Kind: history.Submit, Call: 6 * s, Return: 7 * s, Outcome: history.OK},
		{Kind: history.Read, Call: 7 * s, Return: 8 * s, Outcome: history.Info}, // cancelled by the harness at the end
	}
	ws := Windows(ops, 2*s, 5*s, 8*s)
	if ws[0].OK != 1 || ws[1].Attempted != 2 || ws[1].SuccessRate != 0.5 || ws[2].OK != 2 || ws[2].Attempted != 2 {
		t.Fatalf("%+v", ws)
	}
	if d := FirstWrite(ops, 2*s); d != 2*time.Second {
		t.Fatalf("after fault %v", d)
	}
	if d := FirstWrite(ops, 8*s); d != -1 {
		t.Fatalf("none expected, got %v", d)
	}
	terms, changes := Elections([]LeaderSample{{Leader: "n1", Term: 2}, {Leader: "", Term: 3}, {Leader: "n2", Term: 3}, {Leader: "n2", Term: 3}})
	if terms != 1 || changes != 1 {
		t.Fatalf("terms %d changes %d", terms, changes)
	}
	md := Markdown([]Summary{{Scenario: "halves", Verdict: "PASS", Windows: ws, FirstWriteAfterFault: -1}})
	if !strings.Contains(md, "| halves |") || !strings.Contains(md, "never") {
		t.Fatal(md)
	}
}

func TestMedianRecovery(t *testing.T) {
	sum := func(nem string, d time.Duration) Summary {
		return Summary{Nemesis: nem, Verdict: "PASS", FirstWriteAfterHeal: d}
	}
	tests := []struct {
		name string
		ss   []Summary
		want time.Duration
		n    int
	}{
		{"baseline ignored", []Summary{sum("none", 9*time.Second), sum("halves", time.Second)}, time.Second, 1},
		{"even count", []Summary{sum("halves", time.Second), sum("clock", 3*time.Second)}, 2 * time.Second, 2},
		{"no write after heal is slowest", []Summary{sum("a", -1), sum("b", -1), sum("c", time.Second)}, -1, 3},
		{"none", nil, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, n := MedianRecovery(tc.ss); got != tc.want || n != tc.n {
				t.Fatalf("got %v over %d, want %v over %d", got, n, tc.want, tc.n)
			}
		})
	}
}
