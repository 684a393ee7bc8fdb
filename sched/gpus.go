package sched

import (
	"slices"
	"strconv"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// Exact GPU assignment (issue 24). A job asking for N GPUs (its
// resources.named["gpu"]) on a node that detected devices gets N of them,
// picked here by the leader and committed in the Place entry: the node
// then isolates exactly those, and every replica (and a snapshot restore)
// holds the same choice. The pick is a pure function of the node's
// devices, the ones live attempts and in-flight placements hold, and the
// job's GPU constraints: no map order, no randomness.
//
// A node with a gpu count but no detected devices (--resource gpu=N on a
// host without the driver, as before detection existed) still counts:
// its attempts get the count and no devices.

// maxGPUCombos bounds the exhaustive search of device sets: C(8,4) is 70
// and C(16,8) 12,870; past the bound the pick is greedy.
const maxGPUCombos = 5000

// gpuRequest is the number of GPUs r asks for.
func gpuRequest(r *fsm.Resources) int {
	return int(r.Named["gpu"])
}

// gpuFree returns the indices into the node's GPUs that are healthy, meet
// cons and are not held, whole or by a share.
func (ns *nodeState) gpuFree(cons []fsm.Constraint) []int {
	m := fsm.GPUsMatching(ns.node.GPUs, cons)
	out := m[:0]
	for _, i := range m {
		if (ns.gpuUsed == nil || !ns.gpuUsed[i]) && ns.shared(i) == 0 {
			out = append(out, i)
		}
	}
	return out
}

// gpuFits reports whether the node has the devices r asks for.
func (ns *nodeState) gpuFits(r *fsm.Resources, cons []fsm.Constraint) bool {
	if mib := shareRequest(r); mib > 0 {
		return ns.shareDevice(mib, cons) >= 0
	}
	n := gpuRequest(r)
	if n <= 0 || len(ns.node.GPUs) == 0 {
		return true // count only (checked by fits), or no GPU asked
	}
	return len(ns.gpuFree(cons)) >= n
}

// markGPUs records devices as held, by UUID (unknown ones are ignored: a
// device that vanished holds nothing).
func (ns *nodeState) markGPUs(uuids []string, used bool) {
	if len(uuids) == 0 || len(ns.node.GPUs) == 0 {
		return
	}
	if ns.gpuUsed == nil {
		ns.gpuUsed = make([]bool, len(ns.node.GPUs))
	}
	for _, u := range uuids {
		for i := range ns.node.GPUs {
			if ns.node.GPUs[i].UUID == u {
				ns.gpuUsed[i] = used
			}
		}
	}
}

func attemptGPUUUIDs(gpus []fsm.GPU) []string {
	out := make([]string, len(gpus))
	for i := range gpus {
		out[i] = gpus[i].UUID
	}
	return out
}

// gpuPick is what a placement holds of a node's devices: whole GPUs
// (UUIDs in index order) or the device of a share.
type gpuPick struct {
	whole []string
	share string
}

// takeGPUs picks and holds the devices r asks for on the node: a share's
// device, or whole ones (none when r asks for none or the node has no
// devices). The caller checked gpuFits.
func (ns *nodeState) takeGPUs(r *fsm.Resources, cons []fsm.Constraint) gpuPick {
	if mib := shareRequest(r); mib > 0 {
		i := ns.shareDevice(mib, cons)
		if i < 0 {
			return gpuPick{}
		}
		u := ns.node.GPUs[i].UUID
		ns.markShare(u, mib)
		return gpuPick{share: u}
	}
	return gpuPick{whole: ns.takeWholeGPUs(r, cons)}
}

// releaseGPUs gives back what takeGPUs took.
func (ns *nodeState) releaseGPUs(r *fsm.Resources, p gpuPick) {
	ns.markGPUs(p.whole, false)
	ns.markShare(p.share, -shareRequest(r))
}

// takeWholeGPUs picks and holds the whole devices r asks for, in index
// order.
func (ns *nodeState) takeWholeGPUs(r *fsm.Resources, cons []fsm.Constraint) []string {
	n := gpuRequest(r)
	if n <= 0 || len(ns.node.GPUs) == 0 {
		return nil
	}
	set := bestGPUSet(ns.node.GPUs, ns.gpuFree(cons), n)
	if set == nil {
		return nil
	}
	out := make([]string, len(set))
	for k, i := range set {
		out[k] = ns.node.GPUs[i].UUID
	}
	ns.markGPUs(out, true)
	return out
}

// bestGPUSet picks n of the free devices (indices into gpus, ascending)
// whose links are best: the highest sum of fsm.LinkScore over every pair,
// so a set inside one NVLink island beats one across islands. Ties go to
// the set that comes first in index order, which also packs: the lowest
// free devices go first. Nil when fewer than n are free.
func bestGPUSet(gpus []fsm.GPU, free []int, n int) []int {
	if n <= 0 || len(free) < n {
		return nil
	}
	if len(free) == n || !hasLinks(gpus, free) {
		return append([]int(nil), free[:n]...)
	}
	pair := func(a, b int) int {
		l := gpus[a].Links
		j := gpus[b].Index
		if j < 0 || j >= len(l) {
			return 0
		}
		return fsm.LinkScore(l[j])
	}
	if combinations(len(free), n) <= maxGPUCombos {
		return bestExhaustive(free, n, pair)
	}
	return bestGreedy(free, n, pair)
}

func hasLinks(gpus []fsm.GPU, free []int) bool {
	for _, i := range free {
		if len(gpus[i].Links) > 0 {
			return true
		}
	}
	return false
}

// combinations is C(n, k), saturating past maxGPUCombos.
func combinations(n, k int) int {
	c := 1
	for i := 0; i < k; i++ {
		c = c * (n - i) / (i + 1)
		if c > maxGPUCombos {
			return maxGPUCombos + 1
		}
	}
	return c
}

// bestExhaustive walks every n-subset of free in lexicographic order and
// keeps the first with the highest score.
func bestExhaustive(free []int, n int, pair func(a, b int) int) []int {
	idx := make([]int, n) // positions into free
	for i := range idx {
		idx[i] = i
	}
	var best []int
	bestScore := -1
	for {
		s := 0
		for a := 0; a < n; a++ {
			for b := a + 1; b < n; b++ {
				s += pair(free[idx[a]], free[idx[b]])
			}
		}
		if s > bestScore {
			bestScore = s
			best = best[:0]
			for _, p := range idx {
				best = append(best, free[p])
			}
		}
		// Next combination.
		i := n - 1
		for i >= 0 && idx[i] == len(free)-n+i {
			i--
		}
		if i < 0 {
			return best
		}
		idx[i]++
		for j := i + 1; j < n; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

// bestGreedy grows a set from each free device, adding the device best
// linked to the set so far (lowest index on ties), and keeps the best.
func bestGreedy(free []int, n int, pair func(a, b int) int) []int {
	var best []int
	bestScore := -1
	for _, start := range free {
		set := []int{start}
		in := map[int]bool{start: true}
		s := 0
		for len(set) < n {
			pick, pickScore := -1, -1
			for _, c := range free {
				if in[c] {
					continue
				}
				cs := 0
				for _, m := range set {
					cs += pair(m, c)
				}
				if cs > pickScore {
					pick, pickScore = c, cs
				}
			}
			set = append(set, pick)
			in[pick] = true
			s += pickScore
		}
		if s > bestScore {
			bestScore, best = s, set
		}
	}
	slices.Sort(best)
	return best
}

// gpuMisfit explains why the node lacks the devices r asks for.
func (ns *nodeState) gpuMisfit(r *fsm.Resources, cons []fsm.Constraint) string {
	if mib := shareRequest(r); mib > 0 {
		if ns.shareDevice(mib, cons) >= 0 {
			return ""
		}
		return ns.shareMisfit(mib, cons)
	}
	n := gpuRequest(r)
	if n <= 0 || len(ns.node.GPUs) == 0 {
		return ""
	}
	if len(ns.gpuFree(cons)) >= n {
		return ""
	}
	if len(fsm.GPUsMatching(ns.node.GPUs, cons)) < n {
		if hasGPUConstraint(cons) {
			return "too few GPUs matching " + gpuConstraintText(cons)
		}
		return "too few healthy GPUs"
	}
	return "insufficient gpu"
}

func hasGPUConstraint(cons []fsm.Constraint) bool {
	for _, c := range cons {
		if c.IsGPU() {
			return true
		}
	}
	return false
}

func gpuConstraintText(cons []fsm.Constraint) string {
	var parts []string
	for _, c := range cons {
		if c.IsGPU() {
			parts = append(parts, c.String())
		}
	}
	return strings.Join(parts, ", ")
}

// noNodeHasGPUs is the unplaced reason of a request for more GPUs than
// any node has ("" when some node has that many).
func noNodeHasGPUs(nodes []nodeState, r *fsm.Resources) string {
	n := int64(gpuRequest(r))
	if n <= 0 {
		return ""
	}
	most := int64(0)
	for i := range nodes {
		most = max(most, nodes[i].node.Capacity.Named["gpu"])
	}
	if n <= most {
		return ""
	}
	return "no node has " + strconv.FormatInt(n, 10) + " GPUs (the most any node has is " + strconv.FormatInt(most, 10) + ")"
}
