package sched

import (
	"slices"

	"github.com/foreman-sched/foreman/fsm"
)

// Gang placement (issue 18): a gang job's N tasks are placed together by
// one fsm.Placement with N TaskSlots, or not at all. Gangs are rare and
// small next to the node count, so the placer scans every node of the
// job's class (no candidate window): "fewer than N nodes have room" must
// be exact, never an artefact of the window.

// placeGang picks N slots for the gang, reserving the request on each, or
// returns why it cannot (and reserves nothing).
func (p *placer) placeGang(spec *fsm.JobSpec, req *fsm.Resources, ports *portBook) ([]fsm.TaskSlot, string) {
	g := spec.Gang
	_, cl := p.classOf(spec)
	if cl.err != "" {
		return nil, cl.err
	}
	spread := g.SpreadTasks()
	wantSpread := spec.Placement == "spread"
	picked := make([]int, 0, g.Size)
	var gpus []gpuPick // per picked task
	for len(picked) < g.Size {
		best := -1
		var bestScore float64
		for _, ni := range cl.nodes {
			ns := &p.nodes[ni]
			if spread && slices.Contains(picked, ni) {
				continue
			}
			if !ns.fitsClass(req, cl) {
				continue
			}
			s := score(ns, req)
			if wantSpread {
				s = -s
			}
			if best < 0 || s > bestScore {
				best, bestScore = ni, s
			}
		}
		if best < 0 {
			for k, ni := range picked {
				p.nodes[ni].untake(req)
				p.nodes[ni].releaseGPUs(req, gpus[k])
			}
			return nil, p.explainGang(cl, req, g.Size, len(picked))
		}
		p.nodes[best].take(req)
		gpus = append(gpus, p.nodes[best].takeGPUs(req, cl.cons))
		picked = append(picked, best)
	}
	slots := make([]fsm.TaskSlot, len(picked))
	for i, ni := range picked {
		name := p.nodes[ni].node.Name
		slots[i] = fsm.TaskSlot{Node: name, Port: ports.next(name), GPUs: gpus[i].whole, GPUShare: gpus[i].share}
	}
	return slots, ""
}

// explainGang says why only `found` of the gang's `size` tasks found room.
func (p *placer) explainGang(cl *class, req *fsm.Resources, size, found int) string {
	return "gang of " + itoa(size) + ": only " + itoa(found) + " tasks fit; " + p.explain(cl, req)
}

// untake gives back a request taken by take.
func (ns *nodeState) untake(r *fsm.Resources) {
	ns.attempts--
	ns.freeCPU += r.CPU
	ns.freeMem += r.MemoryMB
	for k, v := range r.Named {
		ns.ownNamed()
		ns.freeNamed[k] += v
	}
}

// portBook allocates GANG_PORTs: per node, the lowest port of the range
// that no live gang task, placement in flight or earlier slot of this
// plan holds. A full range gives 0 (Apply then refuses the placement).
type portBook struct {
	used map[string]map[int]bool
}

func newPortBook(live []fsm.Attempt, placing []Placing) *portBook {
	b := &portBook{used: map[string]map[int]bool{}}
	for i := range live {
		if t := live[i].Task; t != nil {
			b.mark(live[i].Node, t.Port)
		}
	}
	for i := range placing {
		for _, t := range placing[i].Tasks {
			b.mark(t.Node, t.Port)
		}
	}
	return b
}

func (b *portBook) mark(node string, port int) {
	m := b.used[node]
	if m == nil {
		m = map[int]bool{}
		b.used[node] = m
	}
	m[port] = true
}

func (b *portBook) next(node string) int {
	for port := fsm.GangPortBase; port < fsm.GangPortBase+fsm.GangPortCount; port++ {
		if !b.used[node][port] {
			b.mark(node, port)
			return port
		}
	}
	return 0
}
