package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// validKey refuses keys bbolt cannot store or that would break our
// composite index keys.
func validKey(field, v string, max int) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s: empty", ErrBadCommand, field)
	case len(v) > max:
		return fmt.Errorf("%w: %s: %d bytes (max %d)", ErrBadCommand, field, len(v), max)
	case strings.ContainsAny(v, "/\x00"):
		return fmt.Errorf("%w: %s %q: must not contain '/' or NUL", ErrBadCommand, field, v)
	}
	return nil
}

func (a *applier) submitJobs(p *SubmitJobs, res *Result) error {
	// Validate everything first so a refusal writes nothing.
	for i, nj := range p.Jobs {
		if validKey("id", nj.ID, maxIDLen) != nil {
			return validKey(fmt.Sprintf("jobs[%d].id", i), nj.ID, maxIDLen)
		}
		if err := checkSingleton(&nj.Spec); err != nil {
			return fmt.Errorf("%w: jobs[%d].%v", ErrBadCommand, i, err)
		}
		if err := CheckVolumeMounts(fmt.Sprintf("jobs[%d].volumes", i), nj.Spec.Volumes); err != nil {
			return fmt.Errorf("%w: %v", ErrBadCommand, err)
		}
		if err := checkArray(&nj.Spec); err != nil {
			return fmt.Errorf("%w: jobs[%d].spec.%v", ErrBadCommand, i, err)
		}
		if g := nj.Spec.Gang; g != nil && (g.Size < 2 || g.Size > MaxGangSize) {
			return fmt.Errorf("%w: jobs[%d].spec.gang.size: %d (want 2..%d)", ErrBadCommand, i, g.Size, MaxGangSize)
		}
		if len(nj.IdempotencyKey) > maxKeyLen {
			return fmt.Errorf("%w: jobs[%d].idempotency_key: %d bytes (max %d)", ErrBadCommand, i, len(nj.IdempotencyKey), maxKeyLen)
		}
	}
	withDeps := false
	for _, nj := range p.Jobs {
		withDeps = withDeps || len(nj.Spec.DependsOn) > 0 || nj.Spec.Condition != "" || len(nj.Spec.After) > 0
	}
	if withDeps {
		if err := a.checkDeps(p.Jobs, func(i int) string { return fmt.Sprintf("jobs[%d]", i) }); err != nil {
			return err
		}
	}
	var created []*Job
	res.Jobs = make([]SubmitResult, 0, len(p.Jobs))
	for _, nj := range p.Jobs {
		if nj.IdempotencyKey != "" {
			if v := a.get(a.idem, []byte(nj.IdempotencyKey)); v != nil {
				var r idemRecord
				if err := decode(v, &r); err != nil {
					return err
				}
				res.Jobs = append(res.Jobs, SubmitResult{ID: r.JobID, Duplicate: true})
				continue
			}
		}
		// A job ID that exists is a retried command (the leader stamped the
		// ID once); answer as a duplicate rather than overwrite. The write
		// transaction reads its own writes, so this also catches an ID
		// repeated within the entry.
		if a.get(a.jobs, []byte(nj.ID)) != nil {
			res.Jobs = append(res.Jobs, SubmitResult{ID: nj.ID, Duplicate: true})
			continue
		}
		if nj.Spec.Singleton {
			chained, err := a.chainSingleton(&nj.Spec)
			if err != nil {
				return err
			}
			if chained && !withDeps {
				withDeps, created = true, created[:0]
			}
		}
		j, err := a.createJob(nj, "")
		if err != nil {
			return err
		}
		if nj.Spec.Singleton {
			if err := a.recordSingleton(nj.ID, &nj.Spec); err != nil {
				return err
			}
		}
		if withDeps {
			created = append(created, j)
		}
		if nj.IdempotencyKey != "" {
			if a.atText == "" {
				a.atText = rfc3339Text(a.at) // a.at is never zero (applyEntry)
			}
			v := encodeIdemRecord(nj.ID, a.atText)
			if err := a.put(a.idem, []byte(nj.IdempotencyKey), v); err != nil {
				return err
			}
		}
		res.Jobs = append(res.Jobs, SubmitResult{ID: nj.ID})
	}
	if withDeps {
		return a.linkParents(created)
	}
	return nil
}

// submitGroup applies each member as submitJobs would alone, in order, in
// this entry's transaction. A refused member is recorded and skipped. Every
// refusal of submitJobs happens before it writes, so a refused member
// changed nothing; should one ever come after a write, the whole entry is
// refused instead (rolled back; the leader then submits the members one by
// one, see httpapi's group commit).
func (a *applier) submitGroup(p *SubmitGroup, res *Result) error {
	res.Submits = make([]MemberResult, len(p.Submits))
	wrote := a.wrote
	for i := range p.Submits {
		a.wrote = false
		var r Result
		err := a.submitJobs(&p.Submits[i], &r)
		memberWrote := a.wrote
		wrote = wrote || memberWrote
		if err == nil {
			res.Submits[i].Jobs = r.Jobs
			continue
		}
		if memberWrote || !isRefusal(err) {
			a.wrote = wrote
			return fmt.Errorf("submits[%d]: %w", i, err)
		}
		res.Submits[i].Refused = batchErrCode(err) + ": " + err.Error()
	}
	a.wrote = wrote
	return nil
}

// batchItemErr turns "<code>: <message>" (batchErrCode) back into an error
// wrapping the code's sentinel.
func batchItemErr(s string) error {
	code, msg, _ := strings.Cut(s, ": ")
	for _, c := range batchErrCodes {
		if c.code == code {
			return fmt.Errorf("%w: %s", c.err, msg)
		}
	}
	return fmt.Errorf("%w: %s", ErrConflict, s)
}

// due reports whether a waiting/retrying job may start at the entry's time.
func (a *applier) due(j *Job) bool {
	return (j.State == JobWaiting || j.State == JobRetrying) && !j.NextRunAt.After(a.at) && !j.blocked()
}

func (a *applier) release(p *ReleaseJobs, res *Result) error {
	for _, id := range p.JobIDs {
		j, err := a.getJob(id)
		if err != nil {
			skip(res, id, "not found")
			continue
		}
		if !a.due(j) {
			skip(res, id, fmt.Sprintf("job is %s, not due", j.State))
			continue
		}
		from := j.State
		j.State, j.NextRunAt = JobQueued, zeroTime
		if err := a.saveJob(j, from); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) cancelJob(p *CancelJob, res *Result) error {
	j, err := a.getJob(p.JobID)
	if err != nil {
		return err
	}
	if len(p.Indexes) > 0 {
		if j.Spec.Array == nil || j.ArrayTask != nil {
			return fmt.Errorf("%w: indexes: job %s is not an array", ErrBadCommand, j.ID)
		}
		return a.cancelIndexes(j, p.Indexes, cmp.Or(p.Reason, ReasonCancelled))
	}
	if j.State.Terminal() {
		return fmt.Errorf("%w: job %s is already %s", ErrConflict, j.ID, j.State)
	}
	return a.cancel(j, p.Reason)
}

// cancel cancels the non-terminal job j (see CancelJob).
func (a *applier) cancel(j *Job, reason string) error {
	if reason == "" {
		reason = ReasonCancelled
	}
	if j.Spec.Array != nil && j.ArrayTask == nil {
		return a.cancelArray(j, reason)
	}
	if j.Gang != nil && j.Current > 0 && j.Gang.Live > 0 {
		return a.cancelGang(j, reason)
	}
	if j.Current > 0 {
		at, err := a.getAttempt(j.ID, j.Current)
		if err != nil {
			return err
		}
		if at.State.Live() {
			if at.CancelRequested == ReasonCancelled {
				return nil // already asked the node to stop it
			}
			// A pending drain/preempt stop is upgraded: the job must end.
			if err := a.requestStop(at, ReasonCancelled); err != nil {
				return err
			}
			j.Reason = reason
			return a.saveJob(j, j.State)
		}
	}
	from := j.State
	j.State, j.Reason, j.Current, j.NextRunAt = JobCancelled, reason, 0, zeroTime
	return a.saveJob(j, from)
}

func (a *applier) retryJob(p *RetryJob, res *Result) error {
	j, err := a.getJob(p.JobID)
	if err != nil {
		return err
	}
	isArray := j.Spec.Array != nil && j.ArrayTask == nil
	if len(p.Indexes) > 0 && !isArray {
		return fmt.Errorf("%w: indexes: job %s is not an array", ErrBadCommand, j.ID)
	}
	if len(p.Indexes) > 0 || isArray && j.Array != nil && j.State != JobWaiting {
		if len(p.Indexes) == 0 && j.State != JobFailed && j.State != JobCancelled {
			return fmt.Errorf("%w: array %s is %s; only failed or cancelled arrays can be retried (or some of their --indexes)", ErrConflict, j.ID, j.State)
		}
		return a.retryArray(j, p.Indexes)
	}
	if j.State != JobFailed && j.State != JobCancelled && j.State != JobSkipped {
		return fmt.Errorf("%w: job %s is %s; only failed, cancelled or skipped jobs can be retried", ErrConflict, j.ID, j.State)
	}
	if err := a.rerun(j); err != nil {
		return err
	}
	if !j.blocked() {
		return nil
	}
	// It waits for its parents again: released at once if they allow.
	if err := a.countParents(j); err != nil {
		return err
	}
	return a.saveJob(j, JobWaiting)
}

func (a *applier) failJobs(p *FailJobs, res *Result) error {
	reason := p.Reason
	if reason == "" {
		reason = "failed by the scheduler"
	}
	for _, id := range p.JobIDs {
		j, err := a.getJob(id)
		if err != nil {
			skip(res, id, "not found")
			continue
		}
		if j.State.Terminal() || j.Current > 0 {
			skip(res, id, fmt.Sprintf("job is %s", j.State))
			continue
		}
		from := j.State
		j.State, j.Reason, j.NextRunAt = JobFailed, reason, zeroTime
		if err := a.saveJob(j, from); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) setReasons(p *SetReasons, res *Result) error {
	for _, id := range slices.Sorted(maps.Keys(p.Reasons)) {
		j, err := a.getJob(id)
		if err != nil {
			skip(res, id, "not found")
			continue
		}
		if j.State != JobQueued {
			skip(res, id, fmt.Sprintf("job is %s", j.State))
			continue
		}
		if j.Reason == p.Reasons[id] {
			continue
		}
		j.Reason = p.Reasons[id]
		if err := a.saveJob(j, j.State); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) setQueue(p *SetQueue, res *Result) error {
	if err := validKey("name", p.Name, maxKeyLen); err != nil {
		return err
	}
	if p.MaxRunning < 0 {
		return fmt.Errorf("%w: max_running: %d (want >= 0; 0 = unlimited)", ErrBadCommand, p.MaxRunning)
	}
	if p.MaxRunning == 0 {
		return a.del(a.queues, []byte(p.Name))
	}
	return a.putRecord(a.queues, []byte(p.Name), Queue{Name: p.Name, MaxRunning: p.MaxRunning})
}

// gc drops terminal jobs finished before p.Before and idempotency keys
// recorded before p.KeysBefore. A key outlives its job on purpose: a late
// retry of the submit must not create a second job while the key is valid.
func (a *applier) gc(p *GC, res *Result) error {
	if !p.Before.IsZero() {
		// jobs_by_finish lists exactly the terminal jobs finished before
		// p.Before, so GC reads only what it drops.
		ids, err := a.finishedBefore(p.Before)
		if err != nil {
			return err
		}
		for _, id := range ids {
			j, err := a.getJob(id)
			if err != nil {
				return err
			}
			if err := a.deleteJob(j); err != nil {
				return err
			}
		}
		if err := a.gcWorkflows(p.Before); err != nil {
			return err
		}
	}
	if !p.KeysBefore.IsZero() {
		var doomed [][]byte
		c := a.idem.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var r idemRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			if r.RecordedAt.Before(p.KeysBefore) {
				doomed = append(doomed, append([]byte(nil), k...))
			}
		}
		for _, k := range doomed {
			if err := a.del(a.idem, k); err != nil {
				return err
			}
		}
	}
	return a.gcUsage()
}
