package sched

import (
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// The memo reads a spec once while consecutive plans keep asking for it,
// drops it after a plan that did not ask, and never keeps a missing one.
func TestSpecMemoKeepsWhatConsecutivePlansRead(t *testing.T) {
	store := map[string]*fsm.JobSpec{"a": {Priority: 10}, "b": {Priority: 20}}
	reads := map[string]int{}
	read := func(id string) *fsm.JobSpec {
		reads[id]++
		return store[id]
	}
	var m specMemo
	plan := func(ids ...string) {
		get := m.wrap(read)
		for _, id := range ids {
			if got := get(id); got != store[id] {
				t.Fatalf("spec of %s = %v, want %v", id, got, store[id])
			}
		}
	}
	plan("a", "b", "a", "gone")
	plan("a", "gone") // a from the last plan; b not asked
	plan("a", "b")    // b was dropped with the plan that did not ask for it
	plan("gone", "b") // gone is read each time, never kept
	want := map[string]int{"a": 1, "b": 2, "gone": 3}
	for id, n := range want {
		if reads[id] != n {
			t.Errorf("%s read %d times, want %d (all reads: %v)", id, reads[id], n, reads)
		}
	}
	if m.wrap(nil) != nil {
		t.Fatal("a snapshot without JobSpec got one")
	}
}
