package fsm

import (
	"fmt"
	"slices"
	"strings"
)

func (a *applier) place(p *Place, res *Result) error {
	// An entry places many attempts on a few nodes and changes no node:
	// read each node once.
	nodes := map[string]*Node{}
	holds := map[string]*gpuHolds{} // per node, read at its first GPU placement
	for _, pl := range p.Placements {
		j, err := a.getJob(pl.JobID)
		if err != nil {
			skip(res, pl.JobID, "job not found")
			continue
		}
		if j.State != JobQueued && !a.due(j) {
			skip(res, pl.JobID, fmt.Sprintf("job is %s", j.State))
			continue
		}
		if (j.Spec.Gang != nil) != (len(pl.Tasks) > 0) {
			skip(res, pl.JobID, "gang jobs are placed with tasks, other jobs without")
			continue
		}
		if j.Spec.Gang != nil {
			if err := a.placeGang(j, &pl, nodes, holds, res); err != nil {
				return err
			}
			continue
		}
		n := nodes[pl.Node]
		if n == nil {
			if n, err = a.readNode(pl.Node); err != nil {
				skip(res, pl.JobID, fmt.Sprintf("node %q not found", pl.Node))
				continue
			}
			nodes[pl.Node] = n
		}
		if n.Gossip != NodeAlive || n.Eligibility != Eligible {
			skip(res, pl.JobID, fmt.Sprintf("node %s is %s/%s", n.Name, n.Gossip, n.Eligibility))
			continue
		}
		h := holds[n.Name]
		gpus, share, why, err := a.placementGPUs(n, &h, pl.GPUs, pl.GPUShare, pl.Resources.GPUMemoryMiB)
		if err != nil {
			return err
		}
		holds[n.Name] = h
		if why != "" {
			skip(res, pl.JobID, why)
			continue
		}
		from := j.State
		j.Attempts++
		j.CountedAttempts++
		j.Current = j.Attempts
		j.State, j.Reason, j.NextRunAt = JobRunning, "", zeroTime
		at := &Attempt{
			JobID:        j.ID,
			Num:          j.Attempts,
			Node:         n.Name,
			State:        AttemptAssigned,
			FencingToken: a.index,
			Counted:      true,
			Resources:    pl.Resources,
			AssignedAt:   a.at,
			GPUs:         gpus,
			GPUShare:     share,
		}
		if err := a.saveAttempt(at, ""); err != nil {
			return err
		}
		if at.Num == 1 {
			a.pending[len(a.pending)-1].wait = a.at.Sub(j.SubmittedAt)
		}
		if err := a.saveJob(j, from); err != nil {
			return err
		}
	}
	return nil
}

// currentAttempt returns the job's live attempt named by ref, or
// ErrStaleToken when ref is not it.
func (a *applier) currentAttempt(j *Job, num int, token uint64, node string) (*Attempt, error) {
	return a.currentAttemptOf(j.ID, gangCurrent(j.Gang, j.Current, num), num, token, node)
}

// reportedAttempt returns the job a report names and its live attempt
// the report is about, or why it is refused (currentAttempt).
func (a *applier) reportedAttempt(p *ReportAttempt) (*Job, *Attempt, error) {
	j, err := a.getJob(p.JobID)
	if err != nil {
		return nil, nil, err
	}
	at, err := a.currentAttempt(j, p.Attempt, p.FencingToken, p.Node)
	if err != nil {
		return nil, nil, err
	}
	return j, at, nil
}

// gangCurrent is the attempt number a report about num must name: a gang's
// current placement has one current attempt per task.
func gangCurrent(g *GangStatus, current, num int) int {
	if gangAttempt(g, current, num) {
		return num
	}
	return current
}

// currentAttemptOf is currentAttempt for the job jobID whose Current is
// current.
func (a *applier) currentAttemptOf(jobID string, current, num int, token uint64, node string) (*Attempt, error) {
	if current == 0 || current != num {
		return nil, fmt.Errorf("%w: job %s attempt %d is not current (current %d)", ErrStaleToken, jobID, num, current)
	}
	at, err := a.getAttempt(jobID, num)
	if err != nil {
		return nil, err
	}
	switch {
	case !at.State.Live():
		return nil, fmt.Errorf("%w: job %s attempt %d is already %s", ErrStaleToken, jobID, num, at.State)
	case at.FencingToken != token:
		return nil, fmt.Errorf("%w: job %s attempt %d has token %d, report carried %d", ErrStaleToken, jobID, num, at.FencingToken, token)
	case node != "" && at.Node != node:
		return nil, fmt.Errorf("%w: job %s attempt %d runs on %s, report came from %s", ErrStaleToken, jobID, num, at.Node, node)
	}
	return at, nil
}

func (a *applier) report(p *ReportAttempt, res *Result) error {
	switch p.State {
	case AttemptRunning, AttemptSucceeded, AttemptFailed, AttemptKilled:
	case ReportOutputs:
		return a.reportOutputs(p)
	case ReportGPUMemoryOver:
		return a.reportGPUMemoryOver(p)
	default:
		return fmt.Errorf("%w: state: %q (a report is running, succeeded, failed, killed, outputs or gpu_memory_over)", ErrBadCommand, p.State)
	}
	if p.State == AttemptRunning {
		return a.reportRunning(p)
	}
	j, at, err := a.reportedAttempt(p)
	if err != nil {
		return err
	}
	from := at.State
	if !p.StartedAt.IsZero() && at.StartedAt.IsZero() {
		at.StartedAt = p.StartedAt
	}
	at.State, at.Reason = p.State, p.Reason
	at.FinishedAt = p.FinishedAt
	if at.FinishedAt.IsZero() {
		at.FinishedAt = a.at
	}
	at.ExitCode, at.Signal, at.OOM = p.ExitCode, p.Signal, p.OOM
	at.PeakMemoryB, at.CPUTimeNs = p.PeakMemoryB, p.CPUTimeNs
	at.StderrTail = p.StderrTail
	if len(at.StderrTail) > StderrTailMax {
		at.StderrTail = at.StderrTail[len(at.StderrTail)-StderrTailMax:]
	}
	at.Result = p.Result
	if len(at.Result) > ResultMax || p.ResultTruncated {
		at.Result = at.Result[:min(len(at.Result), ResultMax)]
		at.Warning = fmt.Sprintf("result truncated to %d bytes (the job wrote more)", ResultMax)
	}
	var dropped string
	at.Artifacts, dropped = sanitizeArtifacts(p.Artifacts)
	for _, w := range []string{p.ArtifactsWarning, dropped} {
		if w = truncateString(w, 512); w != "" {
			at.Warning = strings.TrimPrefix(at.Warning+"; "+w, "; ")
		}
	}
	if p.Outputs != nil {
		// A bad outputs note must not refuse the finish: drop it, say so.
		if err := validOutputs(p.Outputs, false); err != nil {
			at.Warning = strings.TrimPrefix(at.Warning+"; "+truncateString(err.Error(), 256), "; ")
		} else {
			o := *p.Outputs
			o.Objects, o.NotStored, o.Error = nil, nil, ""
			at.Outputs = &o
		}
	}
	if p.OOM && at.Reason == "" {
		at.Reason = ReasonOOM
	}
	if p.State == AttemptKilled && at.Reason == "" {
		at.Reason = at.CancelRequested // the stop we asked for
	}
	if p.State == AttemptKilled && at.Reason == ReasonPreempted {
		j.Preemptions++
	}
	if at.Task != nil && j.Gang != nil {
		jfrom := j.State
		j.ExitCode = p.ExitCode
		if err := a.gangTaskEnded(j, at, from); err != nil {
			return err
		}
		return a.saveJob(j, jfrom)
	}
	// Kills that are not the job's fault do not use up an attempt.
	if p.State == AttemptKilled && (at.Reason == ReasonFenced || at.Reason == ReasonPreempted || at.Reason == ReasonDrained || IsGPUErrorStop(at.Reason)) {
		at.Counted = false
		j.CountedAttempts--
	}
	if err := a.saveAttempt(at, from); err != nil {
		return err
	}
	jfrom := j.State
	j.Current, j.ExitCode = 0, p.ExitCode
	a.finishJob(j, at)
	return a.saveJob(j, jfrom)
}

// reportRunning applies a "running" report. The job's record does not
// change, so only its current attempt number is read from it.
func (a *applier) reportRunning(p *ReportAttempt) error {
	v := a.get(a.jobs, []byte(p.JobID))
	if v == nil {
		return fmt.Errorf("%w: job %q", ErrNotFound, p.JobID)
	}
	var j jobCurrentView
	if err := decode(v, &j); err != nil {
		return err
	}
	at, err := a.currentAttemptOf(p.JobID, gangCurrent(j.Gang, j.Current, p.Attempt), p.Attempt, p.FencingToken, p.Node)
	if err != nil {
		return err
	}
	from := at.State
	if from == AttemptRunning {
		return nil // a repeated report
	}
	if !p.StartedAt.IsZero() && at.StartedAt.IsZero() {
		at.StartedAt = p.StartedAt
	}
	if at.StartedAt.IsZero() {
		at.StartedAt = a.at
	}
	at.State = AttemptRunning
	if err := a.saveAttempt(at, from); err != nil {
		return err
	}
	if from == AttemptAssigned {
		a.pending[len(a.pending)-1].wait = at.StartedAt.Sub(at.AssignedAt)
	}
	return nil
}

// finishJob moves a job whose attempt at just ended (at is terminal).
func (a *applier) finishJob(j *Job, at *Attempt) {
	switch {
	case at.State == AttemptSucceeded:
		j.State, j.Reason = JobSucceeded, ""
	case at.CancelRequested == ReasonCancelled || (at.State == AttemptKilled && at.Reason == ReasonCancelled):
		j.State = JobCancelled
		if j.Reason == "" {
			j.Reason = ReasonCancelled
		}
	case !at.Counted:
		j.State, j.Reason = JobQueued, fmt.Sprintf("attempt %d %s", at.Num, describe(at))
	case at.State == AttemptKilled && at.Reason == ReasonDeadline:
		j.State, j.Reason = JobFailed, ReasonDeadline
	case at.ExitCode != nil && slices.Contains(j.Spec.NoRetryExitCodes, *at.ExitCode):
		j.State, j.Reason = JobFailed, fmt.Sprintf("attempt %d %s (no retry for this exit code)", at.Num, describe(at))
	case j.CountedAttempts < MaxAttemptsOf(&j.Spec):
		j.State = JobRetrying
		j.NextRunAt = a.at.Add(RetryDelay(j.ID, j.CountedAttempts, j.Spec.Backoff))
		j.Reason = fmt.Sprintf("attempt %d %s", at.Num, describe(at))
	default:
		j.State = JobFailed
		j.Reason = fmt.Sprintf("attempt %d %s; %d of %d attempts used", at.Num, describe(at), j.CountedAttempts, MaxAttemptsOf(&j.Spec))
	}
}

// describe says how an attempt ended, for Job.Reason.
func describe(at *Attempt) string {
	s := string(at.State)
	if at.Reason != "" {
		s += ": " + at.Reason
	}
	if at.ExitCode != nil && at.State != AttemptKilled {
		s += fmt.Sprintf(" (exit %d)", *at.ExitCode)
	}
	return s
}

func (a *applier) markLost(p *MarkLost, res *Result) error {
	reason := p.Reason
	if reason == "" {
		reason = "node lost"
	}
	for _, ref := range p.Attempts {
		j, err := a.getJob(ref.JobID)
		if err != nil {
			skip(res, ref.id(), "job not found")
			continue
		}
		at, err := a.currentAttempt(j, ref.Attempt, ref.FencingToken, p.Node)
		if err != nil {
			skip(res, ref.id(), err.Error())
			continue
		}
		from := at.State
		at.State, at.Reason, at.Counted, at.FinishedAt = AttemptLost, reason, false, a.at
		jfrom := j.State
		if at.Task != nil && j.Gang != nil {
			if err := a.gangTaskEnded(j, at, from); err != nil {
				return err
			}
			if err := a.saveJob(j, jfrom); err != nil {
				return err
			}
			continue
		}
		if err := a.saveAttempt(at, from); err != nil {
			return err
		}
		j.Current = 0
		j.CountedAttempts--
		a.finishJob(j, at)
		if err := a.saveJob(j, jfrom); err != nil {
			return err
		}
	}
	return nil
}

// stopAttempts asks nodes to stop live attempts without cancelling their
// jobs (drain deadline, preemption). A user cancel already requested wins.
func (a *applier) stopAttempts(p *StopAttempts, res *Result) error {
	switch p.Reason {
	case ReasonDrained, ReasonPreempted:
	default:
		return fmt.Errorf("%w: reason: %q (want drained or preempted)", ErrBadCommand, p.Reason)
	}
	for _, ref := range p.Attempts {
		j, err := a.getJob(ref.JobID)
		if err != nil {
			skip(res, ref.id(), "job not found")
			continue
		}
		at, err := a.currentAttempt(j, ref.Attempt, ref.FencingToken, "")
		if err != nil {
			skip(res, ref.id(), err.Error())
			continue
		}
		if at.CancelRequested != "" {
			skip(res, ref.id(), "stop already requested: "+at.CancelRequested)
			continue
		}
		if err := a.requestStopBy(at, p.Reason, p.By); err != nil {
			return err
		}
	}
	return nil
}

// requestStop marks a live attempt for the node to kill.
func (a *applier) requestStop(at *Attempt, reason string) error {
	return a.requestStopBy(at, reason, "")
}

// requestStopBy is requestStop naming the job that caused it (the
// preemptor), for the victim's timeline.
func (a *applier) requestStopBy(at *Attempt, reason, by string) error {
	at.CancelRequested = reason
	if err := a.saveAttempt(at, at.State); err != nil {
		return err
	}
	text := "stop requested: " + reason
	if by != "" {
		text += " by job " + by
	}
	a.emit(Event{Type: EventAttempt, Name: NameStopRequested, JobID: at.JobID, Attempt: at.Num, Node: at.Node, State: string(at.State), Reason: text})
	return nil
}

// id names the attempt in Result.Skipped.
func (r AttemptRef) id() string { return fmt.Sprintf("%s/%d", r.JobID, r.Attempt) }
