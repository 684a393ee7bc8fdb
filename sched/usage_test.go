package sched

import (
	"context"
	"slices"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// The leader turns accounting on with its labels, proposes nothing while
// the state agrees, and again when its labels change.
func TestEnsureUsage(t *testing.T) {
	e := newLoopEnv(t) // accounting on, without labels
	starts := func() int {
		n := -1 // newLoopEnv's
		for _, c := range e.r.log {
			if c.Type == fsm.CmdStartUsage {
				n++
			}
		}
		return n
	}
	labels := func() []string {
		var l []string
		var on bool
		_ = e.f.View(func(tx *fsm.Tx) error { l, on = tx.UsageStarted(); return nil })
		if !on {
			t.Fatal("accounting is off")
		}
		return l
	}
	for i, tc := range []struct {
		labels []string
		starts int
		want   []string
	}{
		{[]string{"team", "project"}, 1, []string{"project", "team"}},
		{[]string{"project", "team", "team"}, 1, []string{"project", "team"}},
		{nil, 2, nil},
	} {
		cfg := loopConfig()
		cfg.UsageLabels = tc.labels
		s, err := New(cfg, Deps{Raft: e.r, State: e.f, Clock: e.clk}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.ensureUsage(context.Background(), e.clk.Now())
		if got := starts(); got != tc.starts {
			t.Errorf("step %d: %d start_usage proposed, want %d", i, got, tc.starts)
		}
		if got := labels(); !slices.Equal(got, tc.want) {
			t.Errorf("step %d: labels %q, want %q", i, got, tc.want)
		}
	}
	cfg := loopConfig()
	cfg.UsageLabels = []string{"a", "b", "c", "d", "e"}
	if _, err := New(cfg, Deps{Raft: e.r, State: e.f, Clock: e.clk}, nil); err == nil {
		t.Error("five usage labels accepted")
	}
}
