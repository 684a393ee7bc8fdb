package sched

import (
	"maps"
	"math/bits"
	"slices"
	"strconv"

	"github.com/foreman-sched/foreman/fsm"
)

// Placement scoring. A full scan of every node per placement costs
// O(nodes) and would cap a 5,000-node cluster at a few thousand
// placements per second. Like Nomad's limit iterator, the placer instead
// compares only the first `limit` feasible nodes from a per-class cursor
// and takes the best of those: bin-pack takes the fullest, spread the
// emptiest. The trade-off is that the choice is the best of a window, not
// of the cluster. Declaring a job unplaceable still needs a full scan, but
// that happens once per job shape per plan (free capacity only shrinks
// during a plan, so a shape that fits nowhere stays unplaceable).
type placer struct {
	nodes   []nodeState
	behind  map[string]bool // nodes not in sync: statically unusable
	classes map[string]*class
	failed  map[shapeKey]string
	limit   int
}

// shapeKey identifies jobs that are interchangeable for placement.
type shapeKey struct {
	class    string
	cpu, mem int64
	named    string
	gpuMem   int64
}

func newPlacer(nodes []nodeState, behind map[string]bool, minCandidates int) *placer {
	limit := bits.Len(uint(len(nodes)))
	if limit < minCandidates {
		limit = minCandidates
	}
	return &placer{nodes: nodes, behind: behind, classes: map[string]*class{}, failed: map[shapeKey]string{}, limit: limit}
}

func shapeOf(ck string, r *fsm.Resources) shapeKey {
	k := shapeKey{class: ck, cpu: r.CPU, mem: r.MemoryMB, gpuMem: r.GPUMemoryMiB}
	if len(r.Named) > 0 {
		for _, n := range slices.Sorted(maps.Keys(r.Named)) {
			k.named += n + "=" + strconv.FormatInt(r.Named[n], 10) + ","
		}
	}
	return k
}

// classOf returns spec's class key and class, the class made on first use.
func (p *placer) classOf(spec *fsm.JobSpec) (string, *class) {
	ck := classKey(spec)
	cl := p.classes[ck]
	if cl == nil {
		cl = newClass(p.nodes, p.behind, spec)
		p.classes[ck] = cl
	}
	return ck, cl
}

// place picks a node for the job and reserves req (the job's request, with
// Config.DefaultRequest filled in) there, or returns why no node can take it.
func (p *placer) place(spec *fsm.JobSpec, req *fsm.Resources) (node int, gpus gpuPick, reason string) {
	ck, cl := p.classOf(spec)
	if cl.err != "" {
		return -1, gpuPick{}, cl.err
	}
	sk := shapeOf(ck, req)
	if r, ok := p.failed[sk]; ok {
		return -1, gpuPick{}, r
	}
	spread := spec.Placement == "spread"
	// A job that requests nothing gains nothing from packing, and packing
	// puts every such process on one node: it goes where the fewest
	// attempts run (its default request bounds how many, not where).
	own := &spec.Resources
	nothing := own.CPU == 0 && own.MemoryMB == 0 && len(own.Named) == 0 && own.GPUMemoryMiB == 0
	n := len(cl.nodes)
	best, bestK, first, found := -1, -1, -1, 0
	var bestScore float64
	for i := 0; i < n && found < p.limit; i++ {
		k := (cl.cursor + i) % n
		ns := &p.nodes[cl.nodes[k]]
		if !ns.fitsClass(req, cl) {
			continue
		}
		if found == 0 {
			first = k
		}
		found++
		s := score(ns, req)
		switch {
		case nothing:
			s = -float64(ns.attempts)
		case spread:
			s = -s
		}
		if best < 0 || s > bestScore {
			best, bestK, bestScore = cl.nodes[k], k, s
		}
	}
	if best < 0 {
		r := p.explain(cl, req)
		p.failed[sk] = r
		return -1, gpuPick{}, r
	}
	// Bin-pack keeps returning to the first node with room until it is
	// full; spread moves on so the next job looks at other nodes.
	if spread || nothing {
		cl.cursor = (bestK + 1) % n
	} else {
		cl.cursor = first
	}
	p.nodes[best].take(req)
	return best, p.nodes[best].takeGPUs(req, cl.cons), ""
}

// score is how full the node would be after placing req: the sum of the
// cpu and memory fractions, each in [0,1] (Nomad's bin-pack score).
func score(ns *nodeState, req *fsm.Resources) float64 {
	c := &ns.node.Capacity
	var s float64
	if c.CPU > 0 {
		s += float64(c.CPU-ns.freeCPU+req.CPU) / float64(c.CPU)
	}
	if c.MemoryMB > 0 {
		s += float64(c.MemoryMB-ns.freeMem+req.MemoryMB) / float64(c.MemoryMB)
	}
	// A GPU job packs GPUs too: whole nodes stay free for the big ones,
	// and a gang's tasks gather on the fewest nodes.
	if g := c.Named["gpu"]; g > 0 && req.Named["gpu"] > 0 {
		s += float64(g-ns.freeNamed["gpu"]+req.Named["gpu"]) / float64(g)
	}
	if mib := shareRequest(req); mib > 0 {
		s += ns.shareScore(mib)
	}
	return s
}

// explain scans every node of the class for the reason a request fits
// none of them.
func (p *placer) explain(cl *class, req *fsm.Resources) string {
	if r := noNodeHasGPUs(p.nodes, req); r != "" {
		return r
	}
	if r := noGPUHasMemory(p.nodes, req); r != "" {
		return r
	}
	counts := make(map[string]int, len(cl.static)+2)
	for r, n := range cl.static {
		counts[r] += n
	}
	for _, i := range cl.nodes {
		if r := p.nodes[i].misfit(req); r != "" {
			counts[r]++
		} else if r := p.nodes[i].gpuMisfit(req, cl.cons); r != "" {
			counts[r]++
		}
	}
	return formatReason(len(p.nodes), counts)
}
