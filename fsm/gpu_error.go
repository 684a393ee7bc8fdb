package fsm

import (
	"fmt"
	"strconv"
	"strings"
)

// A job's GPU error policy (issue 24): what happens to its live attempt
// when a device it holds turns unhealthy (a critical XID, the driver
// excluding it) or vanishes from the node. The node record's change is the
// trigger, so the decision is made in the same Apply that marks the device,
// on every replica alike, and the leader has already stopped placing there.
const (
	// GPUErrorKeep (the default, also ""): the attempt is left to finish
	// or fail on its own; an attempt.gpu_error event names it.
	GPUErrorKeep = "keep"
	// GPUErrorRequeue: the attempt is stopped (stop_requested with
	// reason "gpu_error: …") and, once the node reports it killed, the job
	// is queued again without using up an attempt. For a gang, the task's
	// end stops its siblings and the whole gang is queued again (gang.go),
	// so it restarts from its checkpoint like any other retry.
	GPUErrorRequeue = "requeue"
)

// NameGPUError is the attempt event of a device fault under a live
// attempt: Reason names the device, the fault and the policy applied.
const NameGPUError = "gpu_error"

// IsGPUErrorStop reports whether a kill reason is a gpu_error stop.
func IsGPUErrorStop(reason string) bool {
	return reason == ReasonGPUError || strings.HasPrefix(reason, ReasonGPUError+": ")
}

// maxGPUErrorDetail bounds the device fault carried in a stop request
// (it goes to the supervisor as one line and back as the kill reason).
const maxGPUErrorDetail = 300

// gpuFaults lists, by UUID, the devices of n that were healthy in old and
// are now unhealthy or gone, with why.
func gpuFaults(n *Node, old []GPU) map[string]string {
	var out map[string]string
	add := func(g *GPU, why string) {
		if out == nil {
			out = map[string]string{}
		}
		d := g.UUID + " (index " + strconv.Itoa(g.Index) + "): " + why
		d = strings.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, d)
		out[g.UUID] = truncateString(d, maxGPUErrorDetail)
	}
	now := make(map[string]*GPU, len(n.GPUs))
	for i := range n.GPUs {
		now[n.GPUs[i].UUID] = &n.GPUs[i]
	}
	for i := range old {
		o := &old[i]
		if !o.Healthy() {
			continue
		}
		switch g := now[o.UUID]; {
		case g == nil:
			add(o, "removed from the node")
		case !g.Healthy():
			add(g, g.Health)
		}
	}
	return out
}

// gpuErrorPolicy applies each live attempt's policy on node n whose
// devices changed from old: an event for every attempt holding a faulted
// device, and a stop for those whose job asked to be requeued.
func (a *applier) gpuErrorPolicy(n *Node, old []GPU) error {
	faults := gpuFaults(n, old)
	if len(faults) == 0 {
		return nil
	}
	prefix := livePrefix(n.Name)
	type hit struct {
		job    string
		num    int
		detail string
	}
	var hits []hit
	c := a.live.Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		job, num, ok := splitAttemptKey(k[len(prefix):])
		if !ok {
			continue
		}
		at, err := a.getAttempt(job, num)
		if err != nil {
			continue
		}
		for _, g := range at.Devices() { // a share on a faulting device too
			if d, ok := faults[g.UUID]; ok {
				hits = append(hits, hit{job, num, d})
				break
			}
		}
	}
	for _, h := range hits {
		at, err := a.getAttempt(h.job, h.num)
		if err != nil {
			return err
		}
		j, err := a.getJob(h.job)
		if err != nil {
			continue // a foreign attempt record: nothing to apply
		}
		policy := j.Spec.OnGPUError
		if policy == "" {
			policy = GPUErrorKeep
		}
		what := "on_gpu_error keep: left running"
		requeue := policy == GPUErrorRequeue && at.CancelRequested == ""
		switch {
		case requeue:
			what = "on_gpu_error requeue: stopping it"
		case policy == GPUErrorRequeue:
			what = "on_gpu_error requeue: already stopping (" + at.CancelRequested + ")"
		}
		a.emit(Event{Type: EventAttempt, Name: NameGPUError, JobID: at.JobID, Attempt: at.Num, Node: at.Node,
			State: string(at.State), Reason: fmt.Sprintf("%s; %s", h.detail, what), Namespace: a.namespaceOf(at.JobID)})
		if requeue {
			if err := a.requestStop(at, ReasonGPUError+": "+h.detail); err != nil {
				return err
			}
		}
	}
	return nil
}
