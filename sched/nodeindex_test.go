package sched

import (
	"bytes"
	"slices"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestNodeIndexCache: the index is kept while the same node list comes
// back, rebuilt for another one, and absent for a list not sorted by name.
func TestNodeIndexCache(t *testing.T) {
	var c nodeIndexCache
	nodes := []fsm.Node{node("a", 1, 1), node("b", 1, 1), node("c", 1, 1)}
	idx := c.get(nodes)
	if len(idx) != 3 || idx["a"] != 0 || idx["c"] != 2 {
		t.Fatalf("index %v", idx)
	}
	idx["probe"] = 9 // the same map comes back for the same list
	if again := c.get(nodes); again["probe"] != 9 {
		t.Fatal("the same list got a new index")
	}
	other := slices.Clone(nodes)
	if got := c.get(other); got["probe"] != 0 || got["b"] != 1 {
		t.Fatalf("another list (a changed node bucket) got %v, want a new index", got)
	}
	unsorted := []fsm.Node{node("b", 1, 1), node("a", 1, 1)}
	if got := c.get(unsorted); got != nil {
		t.Fatalf("unsorted nodes got index %v, want nil (Plan sorts them itself)", got)
	}
}

// TestPlanSameWithNodeIndex: a plan given the kept index decides exactly
// what it decides building its own.
func TestPlanSameWithNodeIndex(t *testing.T) {
	s := scaleSnapshot(newRand(7), 300, 3000)
	s.Live = []fsm.Attempt{liveAttempt("busy", "n00007", 1, 1, 3)}
	var c nodeIndexCache
	plan := func(idx map[string]int) [][]byte {
		s.NodeIndex = idx
		var out [][]byte
		for _, cmd := range Plan(s, t0, testConfig()).Commands {
			out = append(out, cmd.Payload)
		}
		return out
	}
	fresh, kept := plan(nil), plan(c.get(s.Nodes))
	if len(fresh) == 0 || !slices.EqualFunc(fresh, kept, bytes.Equal) {
		t.Fatalf("plans differ with the kept index: %d commands vs %d", len(fresh), len(kept))
	}
}
