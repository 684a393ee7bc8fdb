package nemesis

import (
	"reflect"
	"testing"

	"github.com/foreman-sched/foreman/jepsen/netns"
)

func symmetric(g netns.Grudge) bool {
	for a, bs := range g {
		for _, b := range bs {
			found := false
			for _, x := range g[b] {
				found = found || x == a
			}
			if !found {
				return false
			}
		}
	}
	return true
}

func visible(g netns.Grudge, n, a int) int {
	return n - len(g[a])
}

func TestGrudges(t *testing.T) {
	five := []int{0, 1, 2, 3, 4}
	tests := []struct {
		name string
		g    netns.Grudge
		want netns.Grudge
	}{
		{"halves 3", Halves([]int{2, 0, 1}), netns.Grudge{2: {0, 1}, 0: {2}, 1: {2}}},
		{"isolate", Isolate(1, []int{0, 1, 2}), netns.Grudge{1: {0, 2}, 0: {1}, 2: {1}}},
		{"ring 5", MajoritiesRing(five), netns.Grudge{0: {2, 3}, 1: {3, 4}, 2: {0, 4}, 3: {0, 1}, 4: {1, 2}}},
		{"bridge 5", Bridge(five), netns.Grudge{0: {3, 4}, 1: {3, 4}, 3: {0, 1}, 4: {0, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.g, tc.want) {
				t.Fatalf("got %v want %v", tc.g, tc.want)
			}
			if !symmetric(tc.g) {
				t.Fatalf("not symmetric: %v", tc.g)
			}
		})
	}
	// Every node of a 5-ring sees a majority, and the majorities differ.
	ring := MajoritiesRing(five)
	seen := map[string]bool{}
	for _, a := range five {
		if visible(ring, 5, a) < 3 {
			t.Fatalf("node %d sees only %d", a, visible(ring, 5, a))
		}
		k := ""
		for _, b := range five {
			if !contains(ring[a], b) {
				k += string(rune('0' + b))
			}
		}
		if seen[k] {
			t.Fatalf("two nodes see the same majority %s", k)
		}
		seen[k] = true
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
