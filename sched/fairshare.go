package sched

import (
	"math"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Fair share (issue 39): among jobs of one priority level (the effective
// priority rounded down to a priority in use: aging lifts a job to the
// next level, never ahead of its own level's jobs; order.go, levels), the
// next placement goes to the namespace furthest below its share. A namespace's
// key is its dominant-resource share (DRF) of recent plus live allocation,
// divided by its share:
//
//	key(n) = max over r in {cpu, memory, gpus} of (A[n][r] + L[n][r]) / C[r], / share[n]
//
// C[r] is the capacity of the alive nodes; L is what the namespace's live
// attempts, the placements in flight and this plan's placements hold; A
// is its recent average allocation (Snapshot.Recent: finished work,
// decayed with a half-life). Keys only grow during a plan, which is what
// lets the candidate queue re-evaluate them lazily (queue.go). Fair share
// is on when some namespace sets a share (Snapshot.Shares); the others
// then count as share 1.

// Alloc is an allocation rate: what a namespace holds on average (or
// now), in millicores, MiB and whole GPUs.
type Alloc struct {
	CPU      float64 `json:"cpu"`    // millicores
	MemoryMB float64 `json:"memory"` // MiB
	GPUs     float64 `json:"gpus"`
}

func (a *Alloc) add(r *fsm.Resources, tasks int) {
	n := float64(max(1, tasks))
	a.CPU += float64(r.CPU) * n
	a.MemoryMB += float64(r.MemoryMB) * n
	a.GPUs += float64(r.Named["gpu"]) * n
}

// Dominant is a's largest fraction of capacity c (a resource c has none
// of is skipped).
func (a Alloc) Dominant(c Alloc) float64 {
	var d float64
	if c.CPU > 0 {
		d = max(d, a.CPU/c.CPU)
	}
	if c.MemoryMB > 0 {
		d = max(d, a.MemoryMB/c.MemoryMB)
	}
	if c.GPUs > 0 {
		d = max(d, a.GPUs/c.GPUs)
	}
	return d
}

// Capacity is what the alive nodes of nodes offer.
func Capacity(nodes []fsm.Node) Alloc {
	var c Alloc
	for i := range nodes {
		n := &nodes[i]
		if n.Gossip != fsm.NodeAlive && n.Gossip != fsm.NodeSuspect {
			continue
		}
		c.add(&n.Capacity, 1)
	}
	return c
}

// FairKey is the fair-share key of a namespace that holds live and
// recently used recent, with share share (0 counts as 1), on a cluster of
// capacity c: lower goes first.
func FairKey(live, recent Alloc, share int64, c Alloc) float64 {
	sum := Alloc{CPU: live.CPU + recent.CPU, MemoryMB: live.MemoryMB + recent.MemoryMB, GPUs: live.GPUs + recent.GPUs}
	return sum.Dominant(c) / float64(max(1, share))
}

// fairBook holds the namespaces' keys during one plan; nil when fair
// share is off.
type fairBook struct {
	snap *Snapshot
	cap  Alloc
	live map[string]*Alloc  // stored namespace → live allocation (grows)
	keys map[string]float64 // stored namespace → current key
}

// newFairBook builds the keys of a plan: live attempts (their namespace
// read through Snapshot.JobSpec, which the loop memoizes) and the
// placements in flight.
func newFairBook(snap *Snapshot) *fairBook {
	if len(snap.Shares) == 0 {
		return nil
	}
	b := &fairBook{snap: snap, cap: Capacity(snap.Nodes), live: map[string]*Alloc{}, keys: map[string]float64{}}
	if snap.JobSpec != nil {
		for i := range snap.Live {
			a := &snap.Live[i]
			spec := snap.JobSpec(a.JobID)
			if spec == nil {
				continue
			}
			b.at(spec.Namespace).add(&a.Resources, 1)
		}
	}
	for i := range snap.Placing {
		p := &snap.Placing[i]
		b.at(p.Namespace).add(&p.Resources, len(p.Tasks))
	}
	for ns := range b.live {
		b.update(ns)
	}
	return b
}

func (b *fairBook) at(ns string) *Alloc {
	a := b.live[ns]
	if a == nil {
		a = &Alloc{}
		b.live[ns] = a
	}
	return a
}

func (b *fairBook) update(ns string) {
	b.keys[ns] = FairKey(*b.at(ns), b.snap.Recent[ns], b.snap.Shares[ns], b.cap)
}

// key is namespace ns's current key (0 on a nil book: fair share off).
func (b *fairBook) key(ns string) float64 {
	if b == nil {
		return 0
	}
	k, ok := b.keys[ns]
	if !ok {
		b.update(ns)
		k = b.keys[ns]
	}
	return k
}

// take records a placement of tasks tasks of req for namespace ns.
func (b *fairBook) take(ns string, req *fsm.Resources, tasks int) {
	if b == nil {
		return
	}
	b.at(ns).add(req, tasks)
	b.update(ns)
}

// DecayedAverage turns hourly allocation totals into the average
// allocation of an exponential moving window of half-life h at now: each
// hour's total (in resource × milliseconds) weighs (ln 2 / h) ×
// 2^(−age/h), age being now − the hour's middle (not below 0). A steady
// allocation of x held for much longer than h averages x.
func DecayedAverage(totalMs float64, hour, now time.Time, h time.Duration) float64 {
	if h <= 0 {
		return 0
	}
	age := now.Sub(hour.Add(30 * time.Minute))
	if age < 0 {
		age = 0
	}
	rate := math.Ln2 / h.Seconds() // per second
	return totalMs / 1000 * rate * math.Exp2(-age.Seconds()/h.Seconds())
}
