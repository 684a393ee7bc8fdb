package checker

import (
	"maps"
	"slices"
	"strings"

	"github.com/foreman-sched/foreman/jepsen/history"
)

// FinalJob is one job as the cluster reports it after heal and drain.
type FinalJob struct {
	ID             string         `json:"id"`
	State          string         `json:"state"`
	IdempotencyKey string         `json:"idempotency_key"`
	Attempts       []FinalAttempt `json:"attempts,omitempty"`
}

// FinalAttempt is one attempt of a FinalJob.
type FinalAttempt struct {
	Attempt      int    `json:"attempt"`
	Node         string `json:"node"`
	State        string `json:"state"`
	FencingToken uint64 `json:"fencing_token"`
	// Reason qualifies killed attempts (preempted, fenced, cancelled...).
	Reason string `json:"reason,omitempty"`
	// Task is set on a gang task's attempt.
	Task *FinalTask `json:"task,omitempty"`
	// GPUs are the devices the leader picked for the attempt.
	GPUs []FinalGPU `json:"gpus,omitempty"`
	// GPUShare is the device and MiB of a VRAM share (nil: none).
	GPUShare *FinalGPUShare `json:"gpu_share,omitempty"`
}

// FinalGPUShare is an attempt's share of one device.
type FinalGPUShare struct {
	GPU       FinalGPU `json:"gpu"`
	MemoryMiB int64    `json:"memory_mib"`
}

// FinalGPU is one device of an attempt.
type FinalGPU struct {
	UUID  string `json:"uuid"`
	Index int    `json:"index"`
}

// FinalTask is the gang part of an attempt.
type FinalTask struct {
	Index int `json:"index"`
	Size  int `json:"size"`
}

// Terminal reports whether s is a terminal job state.
func Terminal(s string) bool {
	switch s {
	case "succeeded", "failed", "cancelled", "skipped":
		return true
	}
	return false
}

// Queue is Jepsen's total-queue adapted to submissions: an attempted submit
// is an enqueue of its idempotency key, the final listing is the drain.
// LoadKeyPrefix marks the idempotency keys of jobs a nemesis submits as
// load (the storm nemesis).
const LoadKeyPrefix = "nemesis-load-"

// lost = acknowledged keys with no job; unexpected = jobs whose key was never
// attempted; duplicated = keys with more than one job (an idempotency
// violation, so it fails here, unlike at-least-once queues); recovered = jobs
// whose submit was never acknowledged; stuck = acknowledged jobs not terminal
// after the drain deadline (liveness).
//
// Jobs whose key starts with LoadKeyPrefix are a nemesis's load, not the
// workload's, and are left out.
func Queue(ops []history.Op, final []FinalJob) Result {
	r := Result{Name: "submit-queue", Valid: true, Stats: map[string]int{}}
	attempted := map[string]bool{}
	acked := map[string]string{} // key -> job id from the ok response
	for _, op := range ops {
		if op.Kind != history.Submit {
			continue
		}
		attempted[op.Key] = true
		if op.Outcome == history.OK {
			if prev, ok := acked[op.Key]; ok && prev != op.JobID {
				r.errorf("key %s acknowledged with two job ids %s and %s", op.Key, prev, op.JobID)
			}
			acked[op.Key] = op.JobID
		}
	}
	byKey := map[string][]FinalJob{}
	for _, j := range final {
		if strings.HasPrefix(j.IdempotencyKey, LoadKeyPrefix) {
			continue
		}
		byKey[j.IdempotencyKey] = append(byKey[j.IdempotencyKey], j)
	}
	r.Stats["attempted"] = len(attempted)
	r.Stats["acknowledged"] = len(acked)
	for _, k := range slices.Sorted(maps.Keys(acked)) {
		jobs := byKey[k]
		if len(jobs) == 0 {
			r.Stats["lost"]++
			r.errorf("lost: key %s acknowledged as job %s, absent after heal", k, acked[k])
			continue
		}
		found := false
		for _, j := range jobs {
			if j.ID == acked[k] {
				found = true
				if !Terminal(j.State) {
					r.Stats["stuck"]++
					r.errorf("stuck: job %s (key %s) still %s after the drain deadline", j.ID, k, j.State)
				}
			}
		}
		if !found {
			r.Stats["lost"]++
			r.errorf("lost: key %s acknowledged as job %s, only other ids present", k, acked[k])
		}
	}
	for k, jobs := range byKey {
		if !attempted[k] {
			r.Stats["unexpected"] += len(jobs)
			r.errorf("unexpected: job %s with key %q never attempted", jobs[0].ID, k)
			continue
		}
		if len(jobs) > 1 {
			r.Stats["duplicated"] += len(jobs) - 1
			r.errorf("duplicated: key %s created %d jobs", k, len(jobs))
		}
		if _, ok := acked[k]; !ok {
			r.Stats["recovered"]++
		}
	}
	for _, k := range []string{"lost", "unexpected", "duplicated", "recovered", "stuck"} {
		r.Stats[k] += 0
	}
	return r
}

// QueuePresence is Queue without the liveness part, for clusters that run
// no scheduler (the in-process tier): jobs only have to exist.
func QueuePresence(ops []history.Op, final []FinalJob) Result {
	cp := make([]FinalJob, len(final))
	open := 0
	for i, j := range final {
		cp[i] = j
		if !Terminal(j.State) {
			open++
			cp[i].State = "succeeded"
		}
	}
	r := Queue(ops, cp)
	r.Name = "submit-queue-presence"
	r.Stats["not_terminal"] = open
	delete(r.Stats, "stuck")
	return r
}
