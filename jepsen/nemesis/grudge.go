package nemesis

import (
	"sort"

	"github.com/foreman-sched/foreman/jepsen/netns"
)

// Complete returns the symmetric grudge in which every node drops every
// node outside its own component.
func Complete(components ...[]int) netns.Grudge {
	g := netns.Grudge{}
	comp := map[int]int{}
	for ci, c := range components {
		for _, n := range c {
			comp[n] = ci
		}
	}
	for a, ca := range comp {
		for b, cb := range comp {
			if ca != cb {
				g[a] = append(g[a], b)
			}
		}
		sort.Ints(g[a])
	}
	return g
}

// Halves splits nodes (in the given, usually shuffled, order) into a
// minority of len/2 and a majority.
func Halves(order []int) netns.Grudge {
	k := len(order) / 2
	return Complete(append([]int(nil), order[:k]...), append([]int(nil), order[k:]...))
}

// Isolate cuts node i from all others.
func Isolate(i int, nodes []int) netns.Grudge {
	var rest []int
	for _, n := range nodes {
		if n != i {
			rest = append(rest, n)
		}
	}
	return Complete([]int{i}, rest)
}

// MajoritiesRing arranges nodes in a ring (in the given order); each sees
// itself and its nearest neighbours, a majority, and no two nodes see the
// same majority (for 5 nodes). Symmetric.
func MajoritiesRing(order []int) netns.Grudge {
	n := len(order)
	d := (n/2 + 1) / 2 // neighbours visible on each side
	g := netns.Grudge{}
	for i, a := range order {
		for j, b := range order {
			dist := (i - j + n) % n
			dist = min(dist, n-dist)
			if dist > d {
				g[a] = append(g[a], b)
			}
		}
		sort.Ints(g[a])
	}
	return g
}

// Bridge splits nodes into two halves joined only by the middle node,
// which sees both sides.
func Bridge(order []int) netns.Grudge {
	k := len(order) / 2
	a, b := order[:k], order[k+1:]
	g := Complete(append([]int(nil), a...), append([]int(nil), b...))
	return g
}
