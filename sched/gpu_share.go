package sched

import (
	"slices"
	"strconv"

	"github.com/foreman-sched/foreman/fsm"
)

// VRAM shares (issue 24). A job asking resources.gpu_memory X gets X MiB
// of one device's memory; several such jobs share a GPU. The device is
// picked here and named in the Place entry (fsm checks it again).
//
// Packing is first-fit decreasing, the Workron seed's rule: within one
// plan and one level (the effective priority; with fair share on, that
// rounded down to a priority in use, order.go), share jobs are placed
// after the others of that level, largest share first (queue order on ties;
// plan.go's shareBatch), and each takes the first device where it fits.
// "First" prefers devices that already hold shares (by index) over empty
// ones (by index), so shares fill partly used GPUs before breaking into
// a whole one a whole-GPU job could use. Largest first matters under
// fragmentation: 48, 48, 32, 32 GiB fill two 80 GiB devices exactly,
// while arrival order 32, 32, 48, 48 strands the last 48.
//
// A device held whole takes no share, and a device holding any share is
// not free for a whole-GPU job (gpuFree). Shares need devices whose
// memory is known (nvidia-smi answered); a hand-set gpu count offers none.

// shareRequest is the share r asks for, in MiB (0: none).
func shareRequest(r *fsm.Resources) int64 { return r.GPUMemoryMiB }

// markShare adds (or, with a negative mib, removes) a share on the
// device named, ignoring a device the node no longer has.
func (ns *nodeState) markShare(uuid string, mib int64) {
	if uuid == "" || mib == 0 || len(ns.node.GPUs) == 0 {
		return
	}
	if ns.gpuShared == nil {
		ns.gpuShared = make([]int64, len(ns.node.GPUs))
	}
	for i := range ns.node.GPUs {
		if ns.node.GPUs[i].UUID == uuid {
			ns.gpuShared[i] += mib
		}
	}
}

// shared is the MiB held by shares on device i.
func (ns *nodeState) shared(i int) int64 {
	if ns.gpuShared == nil {
		return 0
	}
	return ns.gpuShared[i]
}

// shareDevice picks the device for a share of mib: the first (by index)
// healthy, matching, not-held-whole device with shares and room, else
// the first such device with no shares; -1 when none has room.
func (ns *nodeState) shareDevice(mib int64, cons []fsm.Constraint) int {
	empty := -1
	for _, i := range fsm.GPUsMatching(ns.node.GPUs, cons) {
		if ns.gpuUsed != nil && ns.gpuUsed[i] {
			continue
		}
		s := ns.shared(i)
		if s+mib > ns.node.GPUs[i].MemoryMiB {
			continue
		}
		if s > 0 {
			return i
		}
		if empty < 0 {
			empty = i
		}
	}
	return empty
}

// shareMisfit explains why the node has no device for a share of mib.
func (ns *nodeState) shareMisfit(mib int64, cons []fsm.Constraint) string {
	if len(ns.node.GPUs) == 0 {
		return "no GPUs detected for a memory share"
	}
	m := fsm.GPUsMatching(ns.node.GPUs, cons)
	big := 0
	for _, i := range m {
		if ns.node.GPUs[i].MemoryMiB >= mib {
			big++
		}
	}
	switch {
	case len(m) == 0 && hasGPUConstraint(cons):
		return "no GPU matching " + gpuConstraintText(cons)
	case len(m) == 0:
		return "no healthy GPUs"
	case big == 0:
		return "no GPU with " + fmtMiB(mib) + " of memory"
	}
	return "insufficient gpu memory"
}

// shareScore is the fraction of the node's device memory in use after
// placing a share of mib: share jobs bin-pack onto nodes already sharing.
func (ns *nodeState) shareScore(mib int64) float64 {
	var total, used int64
	for i := range ns.node.GPUs {
		total += ns.node.GPUs[i].MemoryMiB
		used += ns.shared(i)
		if ns.gpuUsed != nil && ns.gpuUsed[i] {
			used += ns.node.GPUs[i].MemoryMiB
		}
	}
	if total <= 0 {
		return 0
	}
	return float64(used+mib) / float64(total)
}

// noGPUHasMemory is the unplaced reason of a share larger than every
// node's largest device ("" when some device is large enough).
func noGPUHasMemory(nodes []nodeState, r *fsm.Resources) string {
	mib := shareRequest(r)
	if mib <= 0 {
		return ""
	}
	most := int64(0)
	for i := range nodes {
		for _, g := range nodes[i].node.GPUs {
			most = max(most, g.MemoryMiB)
		}
	}
	if mib <= most {
		return ""
	}
	if most == 0 {
		return "no node has GPUs with known memory for a " + fmtMiB(mib) + " share"
	}
	return "no GPU has " + fmtMiB(mib) + " of memory (the most any GPU has is " + fmtMiB(most) + ")"
}

// fmtMiB prints MiB as GiB when whole ("60GiB"), else as MiB.
func fmtMiB(mib int64) string {
	if mib%1024 == 0 {
		return strconv.FormatInt(mib/1024, 10) + "GiB"
	}
	return strconv.FormatInt(mib, 10) + "MiB"
}

// shareBatch holds a plan's share jobs of one level (the effective
// priority with fair share off, see levels) so that they are placed
// largest first (first-fit decreasing).
type shareBatch struct {
	held []candidate
}

// hold reports whether c is a share job to hold back (gangs are placed
// at once: their tasks go together anyway).
func (b *shareBatch) hold(c candidate) bool {
	if shareRequest(&c.job.Spec.Resources) <= 0 || c.job.Spec.Gang != nil {
		return false
	}
	b.held = append(b.held, c)
	return true
}

// due reports whether the held jobs must be placed before c: c comes at
// a lower level.
func (b *shareBatch) due(c candidate) bool {
	return len(b.held) > 0 && c.level != b.held[0].level
}

// take returns the held jobs, largest share first (stable: queue order
// on ties), and empties the batch.
func (b *shareBatch) take() []candidate {
	out := b.held
	b.held = nil
	slices.SortStableFunc(out, func(x, y candidate) int {
		a, c := shareRequest(&x.job.Spec.Resources), shareRequest(&y.job.Spec.Resources)
		switch {
		case a > c:
			return -1
		case a < c:
			return 1
		}
		return 0
	})
	return out
}
