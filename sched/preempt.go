package sched

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Priority preemption (issue 18). A queued job that fits on no node may
// evict lower-priority attempts: Plan picks, on one node (N distinct nodes
// for a spread gang), the smallest set of live attempts whose removal makes
// the job fit, and commits one StopAttempts{reason: preempted, by: job}.
// The victims get their kill signal and grace, are reported killed:
// preempted, use up no attempt and are queued again; the preemptor stays
// queued and is placed by the plan after they ended (it is examined before
// any lower-priority job, so the room is its). Being a plan like any other,
// a failover in the middle loses or doubles nothing: Apply ignores a stop
// for an attempt that is no longer current, and a new leader sees the
// victims' CancelRequested and waits for them instead of choosing more.
//
// A victim must be preemptible (fsm.JobSpec.IsPreemptible: by default
// priority < 50), not already told to stop, and of a priority lower than
// the preemptor's by at least max(PreemptionMargin, 1): equal or higher
// priorities are never preempted. Priorities are the specs', not the aged
// effective ones, so waiting long never turns a job into a preemptor.
// Among victims Plan prefers the lowest priority, then the most recently
// started (least work lost). Preempting one task of a gang stops the whole
// gang (fsm/gang.go); it counts as one victim.

// maxPreemptorsPerPlan bounds the preemption searches of one plan: each
// scans the live attempts of the job's class.
const maxPreemptorsPerPlan = 8

// victimInfo is what preemption needs to know about a live attempt's job.
type victimInfo struct {
	priority    int
	preemptible bool
	known       bool
}

// preemption is one plan's preemption state.
type preemption struct {
	pl       *planning
	byNode   map[int][]*fsm.Attempt // live attempts per node index
	info     map[string]victimInfo  // by job ID, read once per plan
	taken    map[string]bool        // attempts already chosen as victims in this plan
	searches int
}

func (pl *planning) preemption() *preemption {
	if pl.pre != nil {
		return pl.pre
	}
	pr := &preemption{pl: pl, byNode: map[int][]*fsm.Attempt{}, info: map[string]victimInfo{}, taken: map[string]bool{}}
	for i := range pl.snap.Live {
		a := &pl.snap.Live[i]
		if ni, ok := pl.nodeIdx[a.Node]; ok {
			pr.byNode[ni] = append(pr.byNode[ni], a)
		}
	}
	pl.pre = pr
	return pr
}

func (pr *preemption) jobInfo(id string) victimInfo {
	if v, ok := pr.info[id]; ok {
		return v
	}
	var v victimInfo
	if f := pr.pl.snap.JobSpec; f != nil {
		if s := f(id); s != nil {
			v = victimInfo{priority: s.Priority, preemptible: s.IsPreemptible(), known: true}
		}
	}
	pr.info[id] = v
	return v
}

// nodeChoice is what preempting on one node costs.
type nodeChoice struct {
	node    int
	victims []*fsm.Attempt
	waiting int // attempts already stopping there that the job waits for
	maxPrio int
	sumPrio int
}

// try looks for victims for job j (request req) that did not fit. It
// returns the reason to record and whether stops were planned.
func (pr *preemption) try(p *placer, j *fsm.Job, req *fsm.Resources) (string, bool) {
	margin := max(pr.pl.cfg.PreemptionMargin, 1)
	if j.Spec.Priority < margin || pr.searches >= maxPreemptorsPerPlan {
		return "", false
	}
	if shareRequest(req) > 0 {
		return "", false // victims are found by counts; a share needs one device's memory
	}
	ck := classKey(&j.Spec)
	cl := p.classes[ck]
	if cl == nil || cl.err != "" {
		return "", false
	}
	pr.searches++
	need := 1
	spread := true
	if g := j.Spec.Gang; g != nil {
		need, spread = g.Size, g.SpreadTasks()
	}
	if !spread {
		return "", false // packed gangs are not preemptors (one node's choice is not enough to reason about)
	}
	var choices []nodeChoice
	for _, ni := range cl.nodes {
		if c, ok := pr.onNode(ni, j, req, margin); ok {
			choices = append(choices, c)
		}
	}
	if len(choices) < need {
		return "", false
	}
	slices.SortFunc(choices, func(a, b nodeChoice) int {
		if len(a.victims) != len(b.victims) {
			return len(a.victims) - len(b.victims)
		}
		if a.maxPrio != b.maxPrio {
			return a.maxPrio - b.maxPrio
		}
		if a.sumPrio != b.sumPrio {
			return a.sumPrio - b.sumPrio
		}
		return strings.Compare(p.nodes[a.node].node.Name, p.nodes[b.node].node.Name)
	})
	chosen := choices[:need]
	var victims []*fsm.Attempt
	var nodes []string
	waiting := 0
	for _, c := range chosen {
		victims = append(victims, c.victims...)
		waiting += c.waiting
		if len(c.victims) > 0 {
			nodes = append(nodes, p.nodes[c.node].node.Name)
		}
	}
	if len(victims) == 0 && waiting == 0 {
		return "", false
	}
	// The room the preemptor counts on is its for the rest of the plan: a
	// lower-priority job examined later must not take it (on a node
	// without victims, or where victims are stopping), or once the victims
	// end the preemptor does not fit and preempts again, the re-queued
	// victims fill the room again, and so on (the jepsen gang workload
	// saw one job preempted 170 times). In the next plan the preemptor is
	// examined before any lower priority, so nothing needs to persist.
	for _, c := range chosen {
		pr.pl.nodes[c.node].take(req)
	}
	if len(victims) == 0 {
		return fmt.Sprintf("waiting for %d stopping attempts to free room", waiting), false
	}
	for _, v := range victims {
		pr.taken[attemptKey(v)] = true
		pr.pl.preempt = append(pr.pl.preempt, preemptStop{by: j.ID, ref: ref(v)})
	}
	return fmt.Sprintf("preempting %d attempts on %s", len(victims), strings.Join(nodes, ", ")), true
}

// onNode finds the smallest set of victims on node ni that makes req fit
// there. A node where attempts are already stopping and whose room after
// they end is enough needs no victims (it waits for them).
func (pr *preemption) onNode(ni int, j *fsm.Job, req *fsm.Resources, margin int) (nodeChoice, bool) {
	ns := pr.pl.nodes[ni]
	ns.freeNamed, ns.namedOwned = copyNamed(ns.freeNamed), true
	c := nodeChoice{node: ni}
	var cands []*fsm.Attempt
	for _, a := range pr.byNode[ni] {
		if a.CancelRequested != "" || pr.taken[attemptKey(a)] {
			if a.CancelRequested != "" {
				ns.untake(&a.Resources)
				c.waiting++
			}
			continue
		}
		v := pr.jobInfo(a.JobID)
		if !v.known || !v.preemptible || j.Spec.Priority-v.priority < margin {
			continue
		}
		cands = append(cands, a)
	}
	if ns.fits(req) {
		return c, true // no victims needed (some may be stopping already)
	}
	c.waiting = 0
	// Lowest priority first, then the most recently started.
	slices.SortFunc(cands, func(a, b *fsm.Attempt) int {
		pa, pb := pr.jobInfo(a.JobID).priority, pr.jobInfo(b.JobID).priority
		if pa != pb {
			return pa - pb
		}
		if c := startOf(b).Compare(startOf(a)); c != 0 {
			return c
		}
		return strings.Compare(attemptKey(a), attemptKey(b))
	})
	picked := smallestSet(&ns, cands, req)
	if picked == nil {
		return c, false
	}
	c.victims = picked
	for _, a := range picked {
		pv := pr.jobInfo(a.JobID).priority
		c.maxPrio = max(c.maxPrio, pv)
		c.sumPrio += pv
	}
	return c, true
}

// smallestSet returns victims (in preference order) whose removal from ns
// makes req fit, or nil. One or two victims are searched exhaustively, in
// preference order, so the first set found of the smallest size is the
// most preferred; larger sets are built greedily in preference order and
// then pruned of every victim the job fits without.
func smallestSet(ns *nodeState, cands []*fsm.Attempt, req *fsm.Resources) []*fsm.Attempt {
	for _, a := range cands {
		ns.untake(&a.Resources)
		ok := ns.fits(req)
		ns.take(&a.Resources)
		if ok {
			return []*fsm.Attempt{a}
		}
	}
	if len(cands) <= 32 {
		for i, a := range cands {
			ns.untake(&a.Resources)
			for _, b := range cands[i+1:] {
				ns.untake(&b.Resources)
				ok := ns.fits(req)
				ns.take(&b.Resources)
				if ok {
					ns.take(&a.Resources)
					return []*fsm.Attempt{a, b}
				}
			}
			ns.take(&a.Resources)
		}
	}
	var picked []*fsm.Attempt
	for _, a := range cands {
		if ns.fits(req) {
			break
		}
		ns.untake(&a.Resources)
		picked = append(picked, a)
	}
	if !ns.fits(req) {
		return nil
	}
	for i := len(picked) - 1; i >= 0; i-- {
		ns.take(&picked[i].Resources)
		if ns.fits(req) {
			picked = slices.Delete(picked, i, i+1)
			continue
		}
		ns.untake(&picked[i].Resources)
	}
	return picked
}

func copyNamed(m map[string]int64) map[string]int64 {
	if m == nil {
		return nil
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// startOf is when the attempt started (or was assigned, if not yet).
func startOf(a *fsm.Attempt) time.Time {
	if !a.StartedAt.IsZero() {
		return a.StartedAt
	}
	return a.AssignedAt
}

func attemptKey(a *fsm.Attempt) string { return a.JobID + "/" + itoa(a.Num) }

// preemptStop is one victim and its preemptor.
type preemptStop struct {
	by  string
	ref fsm.AttemptRef
}

// preemptCommands groups the plan's victims by preemptor, one StopAttempts
// per preemptor (a gang's victims on N nodes in one entry).
func (pl *planning) preemptCommands() []*fsm.StopAttempts {
	var out []*fsm.StopAttempts
	for _, s := range pl.preempt {
		if n := len(out); n > 0 && out[n-1].By == s.by {
			out[n-1].Attempts = append(out[n-1].Attempts, s.ref)
			continue
		}
		out = append(out, &fsm.StopAttempts{Reason: fsm.ReasonPreempted, By: s.by, Attempts: []fsm.AttemptRef{s.ref}})
	}
	return out
}
