package fsm

import (
	"fmt"
	"net"
	"slices"
	"strconv"
)

// Gangs (issue 18). A gang is one job whose spec has Gang{Size: N}: it is
// listed, cancelled and retried as one job, and it is placed as N tasks at
// once by one Placement with N TaskSlots, in one raft entry, so every task
// shares the entry's index as its fencing token. Task i of a placement is
// the attempt numbered Current+i; each task has its own attempts, logs and
// attempt budget (GangStatus.Counted).
//
// When one task ends other than by succeeding (failed, killed, lost), Apply
// records why in GangStatus.Stop, decides the gang's outcome from that task
// alone (retry after backoff, re-queue, fail, cancel) and asks every live
// sibling to stop (CancelRequested = "gang": kill signal, grace, SIGKILL by
// its supervisor). Siblings killed that way do not use up an attempt. When
// the last task of the placement has ended the outcome is applied to the
// job, so a new placement never overlaps the old one.

// MaxGangSize bounds Gang.Size (each task's attempt lists every peer).
const MaxGangSize = 256

// GangPortBase and GangPortCount are the range the scheduler allocates
// GANG_PORT from, per node.
const (
	GangPortBase  = 31000
	GangPortCount = 1000
)

// DefaultPreemptibleBelow: a job with a priority below it is preemptible
// unless its spec says preemptible: false.
const DefaultPreemptibleBelow = 50

// GangSpec asks for N tasks placed together.
type GangSpec struct {
	Size int `json:"size"`
	// Spread puts every task on a distinct node (nil: true). False allows
	// packing several tasks onto one node.
	Spread *bool `json:"spread,omitempty"`
}

// SpreadTasks reports whether tasks must land on distinct nodes.
func (g *GangSpec) SpreadTasks() bool { return g.Spread == nil || *g.Spread }

// IsPreemptible applies the default for a nil Preemptible.
func (s *JobSpec) IsPreemptible() bool {
	if s.Preemptible != nil {
		return *s.Preemptible
	}
	return s.Priority < DefaultPreemptibleBelow
}

// GangStatus is a gang job's replicated progress.
type GangStatus struct {
	Size int `json:"size"`
	// Token is the fencing token of the current (or last) placement.
	Token uint64 `json:"token,omitempty"`
	// Live counts the tasks of the current placement still live.
	Live int `json:"live,omitempty"`
	// Succeeded counts the tasks of the current placement that succeeded.
	Succeeded int `json:"succeeded,omitempty"`
	// Stop says why the current placement is being stopped ("" while it
	// runs); Outcome is the job state it ends in once no task is live.
	Stop    string   `json:"stop,omitempty"`
	Outcome JobState `json:"outcome,omitempty"`
	// Counted is, per task, the attempts that used up max_attempts.
	Counted []int `json:"counted"`
	// Placements counts the gang's placements.
	Placements int `json:"placements,omitempty"`
}

// TaskSlot is where one task of a gang placement goes.
type TaskSlot struct {
	Node string `json:"node"`
	Port int    `json:"port"`
	// GPUs are the UUIDs of this task's devices on Node (Placement.GPUs).
	GPUs []string `json:"gpus,omitempty"`
	// GPUShare is the UUID of this task's shared device (Placement.GPUShare).
	GPUShare string `json:"gpu_share,omitempty"`
}

// GangTask is the gang part of a task's attempt: what the job gets as
// GANG_INDEX, GANG_SIZE, GANG_PORT and GANG_PEERS.
type GangTask struct {
	Index int `json:"index"`
	Size  int `json:"size"`
	Port  int `json:"port"`
	// Peers is every task's host:port in task order (its own included).
	Peers []string `json:"peers"`
}

// gangAttempt reports whether num names a task of j's current placement.
func gangAttempt(g *GangStatus, current, num int) bool {
	return g != nil && current > 0 && num >= current && num < current+g.Size
}

// placeGang applies a gang placement: every task or none.
func (a *applier) placeGang(j *Job, pl *Placement, nodes map[string]*Node, holds map[string]*gpuHolds, res *Result) error {
	size := j.Spec.Gang.Size
	if len(pl.Tasks) != size {
		skip(res, pl.JobID, fmt.Sprintf("gang placement has %d tasks, the gang %d", len(pl.Tasks), size))
		return nil
	}
	seen := map[string]bool{}
	peers := make([]string, size)
	gpus := make([][]GPU, size)
	shares := make([]*GPUShare, size)
	// The tasks' holds are checked on copies: a gang skipped halfway must
	// not leave its first tasks' devices held for the entry's later
	// placements.
	local := map[string]*gpuHolds{}
	for i, t := range pl.Tasks {
		n := nodes[t.Node]
		if n == nil {
			var err error
			if n, err = a.readNode(t.Node); err != nil {
				skip(res, pl.JobID, fmt.Sprintf("tasks[%d]: node %q not found", i, t.Node))
				return nil
			}
			nodes[t.Node] = n
		}
		if n.Gossip != NodeAlive || n.Eligibility != Eligible {
			skip(res, pl.JobID, fmt.Sprintf("tasks[%d]: node %s is %s/%s", i, n.Name, n.Gossip, n.Eligibility))
			return nil
		}
		if seen[t.Node] && j.Spec.Gang.SpreadTasks() {
			skip(res, pl.JobID, fmt.Sprintf("tasks[%d]: node %s holds another task of a spread gang", i, t.Node))
			return nil
		}
		if t.Port <= 0 || t.Port > 65535 {
			skip(res, pl.JobID, fmt.Sprintf("tasks[%d]: port %d", i, t.Port))
			return nil
		}
		h, ok := local[n.Name]
		if !ok {
			h = holds[n.Name].clone()
		}
		g, sh, why, err := a.placementGPUs(n, &h, t.GPUs, t.GPUShare, pl.Resources.GPUMemoryMiB)
		if err != nil {
			return err
		}
		local[n.Name] = h
		if why != "" {
			skip(res, pl.JobID, fmt.Sprintf("tasks[%d]: %s", i, why))
			return nil
		}
		gpus[i], shares[i] = g, sh
		seen[t.Node] = true
		host := n.HTTPAddr
		if h, _, err := net.SplitHostPort(n.HTTPAddr); err == nil {
			host = h
		}
		peers[i] = net.JoinHostPort(host, strconv.Itoa(t.Port))
	}
	for name, h := range local {
		if h != nil {
			holds[name] = h
		}
	}
	from := j.State
	g := j.Gang
	if g == nil || g.Size != size {
		g = &GangStatus{Size: size, Counted: make([]int, size)}
		j.Gang = g
	}
	base := j.Attempts + 1
	j.Attempts += size
	j.Current = base
	j.State, j.Reason, j.NextRunAt = JobRunning, "", zeroTime
	g.Token, g.Live, g.Succeeded, g.Stop, g.Outcome = a.index, size, 0, "", ""
	g.Placements++
	for i, t := range pl.Tasks {
		at := &Attempt{
			JobID:        j.ID,
			Num:          base + i,
			Node:         t.Node,
			State:        AttemptAssigned,
			FencingToken: a.index,
			Resources:    pl.Resources,
			AssignedAt:   a.at,
			Task:         &GangTask{Index: i, Size: size, Port: t.Port, Peers: peers},
			GPUs:         gpus[i],
			GPUShare:     shares[i],
		}
		if err := a.saveAttempt(at, ""); err != nil {
			return err
		}
		if at.Num == 1 {
			a.pending[len(a.pending)-1].wait = a.at.Sub(j.SubmittedAt)
		}
	}
	return a.saveJob(j, from)
}

// countsAgainstBudget says whether an ended task attempt uses up one of
// its task's attempts: kills that are not the job's fault do not.
func countsAgainstBudget(at *Attempt) bool {
	switch at.State {
	case AttemptFailed:
		return true
	case AttemptKilled:
		switch at.Reason {
		case ReasonFenced, ReasonPreempted, ReasonDrained, ReasonGang, ReasonCancelled:
			return false
		}
		if IsGPUErrorStop(at.Reason) {
			return false
		}
		return at.CancelRequested == "" || at.CancelRequested == ReasonDeadline
	}
	return false
}

// gangTaskEnded saves the task attempt at, which just ended (it was in
// state from), and moves its gang job. It stops the live siblings on the
// first task that did not succeed and settles the job once no task is live.
func (a *applier) gangTaskEnded(j *Job, at *Attempt, from AttemptState) error {
	g := j.Gang
	idx := at.Task.Index
	if countsAgainstBudget(at) && idx < len(g.Counted) {
		at.Counted = true
		g.Counted[idx]++
		j.CountedAttempts = slices.Max(g.Counted)
	}
	if err := a.saveAttempt(at, from); err != nil {
		return err
	}
	if g.Live > 0 {
		g.Live--
	}
	if at.State == AttemptSucceeded {
		g.Succeeded++
	} else if g.Stop == "" {
		g.Stop = fmt.Sprintf("task %d attempt %d %s", idx, at.Num, describe(at))
		g.Outcome = a.gangOutcome(j, at)
		if err := a.stopSiblings(j, ReasonGang); err != nil {
			return err
		}
	}
	if g.Live > 0 {
		return nil
	}
	j.Current = 0
	switch {
	case g.Stop == "":
		j.State, j.Reason = JobSucceeded, ""
	case g.Outcome == JobRetrying:
		j.State, j.Reason = JobRetrying, g.Stop
		j.NextRunAt = a.at.Add(RetryDelay(j.ID, j.CountedAttempts, j.Spec.Backoff))
	case g.Outcome == JobFailed:
		j.State = JobFailed
		j.Reason = fmt.Sprintf("%s; %d of %d attempts used", g.Stop, j.CountedAttempts, MaxAttemptsOf(&j.Spec))
	case g.Outcome == JobCancelled:
		j.State = JobCancelled
		if j.Reason == "" {
			j.Reason = ReasonCancelled
		}
	default:
		j.State, j.Reason = JobQueued, g.Stop
	}
	return nil
}

// gangOutcome decides, from the first task that ended without success,
// what the whole gang does once every sibling has stopped.
func (a *applier) gangOutcome(j *Job, at *Attempt) JobState {
	switch {
	case at.CancelRequested == ReasonCancelled || (at.State == AttemptKilled && at.Reason == ReasonCancelled):
		return JobCancelled
	case !at.Counted:
		return JobQueued
	case at.State == AttemptKilled && at.Reason == ReasonDeadline:
		return JobFailed
	case at.ExitCode != nil && slices.Contains(j.Spec.NoRetryExitCodes, *at.ExitCode):
		return JobFailed
	case at.Task != nil && at.Task.Index < len(j.Gang.Counted) && j.Gang.Counted[at.Task.Index] < MaxAttemptsOf(&j.Spec):
		return JobRetrying
	}
	return JobFailed
}

// stopSiblings asks every live task of j's current placement to stop. A
// task already told to stop keeps its reason unless this is a cancel.
func (a *applier) stopSiblings(j *Job, reason string) error {
	if j.Current == 0 || j.Gang == nil {
		return nil
	}
	for num := j.Current; num < j.Current+j.Gang.Size; num++ {
		at, err := a.getAttempt(j.ID, num)
		if err != nil {
			continue // not created (a foreign record): nothing to stop
		}
		if !at.State.Live() || at.CancelRequested == reason || at.CancelRequested == ReasonCancelled {
			continue
		}
		if at.CancelRequested != "" && reason != ReasonCancelled {
			continue
		}
		if err := a.requestStop(at, reason); err != nil {
			return err
		}
	}
	return nil
}

// cancelGang cancels a gang job with live tasks: every task is stopped and
// the job becomes cancelled when the last one has ended.
func (a *applier) cancelGang(j *Job, reason string) error {
	g := j.Gang
	if g.Stop == "" {
		g.Stop = "cancelled"
	}
	g.Outcome = JobCancelled
	j.Reason = reason
	if err := a.stopSiblings(j, ReasonCancelled); err != nil {
		return err
	}
	return a.saveJob(j, j.State)
}
