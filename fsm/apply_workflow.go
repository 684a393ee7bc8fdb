package fsm

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

func (a *applier) submitWorkflow(p *SubmitWorkflow, res *Result) error {
	// Validate everything first so a refusal writes nothing.
	if err := validKey("id", p.ID, maxIDLen); err != nil {
		return err
	}
	if len(p.Name) > maxKeyLen {
		return fmt.Errorf("%w: name: %d bytes (max %d)", ErrBadCommand, len(p.Name), maxKeyLen)
	}
	switch n := len(p.Jobs); {
	case n == 0:
		return fmt.Errorf("%w: jobs: a workflow needs at least one job", ErrBadCommand)
	case n > MaxWorkflowJobs:
		return fmt.Errorf("%w: jobs: %d jobs (max %d per workflow)", ErrBadCommand, n, MaxWorkflowJobs)
	}
	if len(p.IdempotencyKey) > maxKeyLen {
		return fmt.Errorf("%w: idempotency_key: %d bytes (max %d)", ErrBadCommand, len(p.IdempotencyKey), maxKeyLen)
	}
	id := p.ID
	if p.IdempotencyKey != "" {
		if v := a.idem.Get(workflowIdemKey(p.IdempotencyKey)); v != nil {
			var r idemRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			id = r.JobID // the workflow's ID
		}
	}
	if w, err := a.getWorkflow(id); err == nil {
		// A retried command: answer with what the first one created.
		res.Workflow = w.ID
		ids, err := a.memberIDs(w.ID)
		if err != nil {
			return err
		}
		for _, id := range ids {
			res.Jobs = append(res.Jobs, SubmitResult{ID: id, Duplicate: true})
		}
		return nil
	}
	field := func(i int) string { return fmt.Sprintf("jobs[%d]", i) }
	names := make(map[string]int, len(p.Jobs))
	inWorkflow := make(map[string]bool, len(p.Jobs))
	for i, nj := range p.Jobs {
		if err := validKey(field(i)+".id", nj.ID, maxIDLen); err != nil {
			return err
		}
		if nj.IdempotencyKey != "" {
			return fmt.Errorf("%w: %s.idempotency_key: not supported inside a workflow", ErrBadCommand, field(i))
		}
		if nj.Spec.Singleton {
			return fmt.Errorf("%w: %s.singleton: not supported inside a workflow", ErrBadCommand, field(i))
		}
		if err := CheckVolumeMounts(field(i)+".volumes", nj.Spec.Volumes); err != nil {
			return fmt.Errorf("%w: %v", ErrBadCommand, err)
		}
		if err := checkArray(&nj.Spec); err != nil {
			return fmt.Errorf("%w: %s.spec.%v", ErrBadCommand, field(i), err)
		}
		if err := ValidJobName(nj.Spec.Name); err != nil {
			return fmt.Errorf("%w: %s.name: %v", ErrBadCommand, field(i), err)
		}
		if j, dup := names[nj.Spec.Name]; dup {
			return fmt.Errorf("%w: %s.name: %q is also the name of jobs[%d]", ErrBadCommand, field(i), nj.Spec.Name, j)
		}
		names[nj.Spec.Name] = i
		if inWorkflow[nj.ID] || a.jobs.Get([]byte(nj.ID)) != nil {
			return fmt.Errorf("%w: %s.id: job %s already exists", ErrConflict, field(i), nj.ID)
		}
		inWorkflow[nj.ID] = true
	}
	for i, nj := range p.Jobs {
		for _, pid := range nj.Spec.DependsOn {
			if !inWorkflow[pid] && pid != nj.ID {
				return fmt.Errorf("%w: %s.depends_on: %q is not a job of this workflow", ErrBadCommand, field(i), pid)
			}
		}
	}
	if err := a.checkDeps(p.Jobs, field); err != nil {
		return err
	}

	w := &Workflow{
		ID: p.ID, Name: p.Name, Namespace: p.Namespace, Jobs: len(p.Jobs), Counts: map[JobState]int{},
		SubmittedAt: a.at, CreateIndex: a.index,
	}
	a.wfs[w.ID] = w
	res.Workflow = w.ID
	if p.IdempotencyKey != "" {
		if a.atText == "" {
			a.atText = rfc3339Text(a.at)
		}
		if err := a.put(a.idem, workflowIdemKey(p.IdempotencyKey), encodeIdemRecord(w.ID, a.atText)); err != nil {
			return err
		}
	}
	members, err := a.bucket(bucketWorkflowJobs)
	if err != nil {
		return err
	}
	created := make([]*Job, 0, len(p.Jobs))
	a.pending = slices.Grow(a.pending, len(p.Jobs)) // an event per job

	res.Jobs = make([]SubmitResult, 0, len(p.Jobs))
	for i, nj := range p.Jobs {
		if err := a.put(members, memberKey(w.ID, i), []byte(nj.ID)); err != nil {
			return err
		}
		j, err := a.createJob(nj, w.ID)
		if err != nil {
			return err
		}
		created = append(created, j)
		res.Jobs = append(res.Jobs, SubmitResult{ID: nj.ID})
	}
	return a.linkParents(created)
}

// createJob stores a new job: queued, or waiting on its run_at or its
// parents (linkParents then counts them).
func (a *applier) createJob(nj NewJob, workflow string) (*Job, error) {
	j := &Job{
		ID:             nj.ID,
		Spec:           nj.Spec,
		State:          JobQueued,
		IdempotencyKey: nj.IdempotencyKey,
		SubmittedBy:    nj.SubmittedBy,
		SubmittedAt:    a.at,
		CreateIndex:    a.index,
		Workflow:       workflow,
	}
	if a := nj.Spec.Array; a != nil {
		j.Array = &ArrayStatus{Size: a.Size()}
	}
	if len(nj.Spec.DependsOn) > 0 {
		j.State, j.Deps = JobWaiting, &Deps{Parents: len(nj.Spec.DependsOn)}
	} else if rt := nj.Spec.RunAt; rt != nil && rt.After(a.at) {
		j.State, j.NextRunAt = JobWaiting, *rt
	}
	return j, a.saveJob(j, "")
}

func (a *applier) cancelWorkflow(p *CancelWorkflow, res *Result) error {
	w, err := a.getWorkflow(p.ID)
	if err != nil {
		return err
	}
	if w.State != WorkflowRunning {
		return fmt.Errorf("%w: workflow %s is already %s", ErrConflict, w.ID, w.State)
	}
	ids, err := a.memberIDs(w.ID)
	if err != nil {
		return err
	}
	// Every job is being cancelled: a parent's cancel must not skip (or
	// release) a child that is about to be cancelled itself.
	a.holdDecisions = true
	defer func() { a.holdDecisions = false }()
	for _, id := range ids {
		j, err := a.getJob(id)
		if err != nil {
			continue // dropped by GC
		}
		if j.State.Terminal() {
			continue
		}
		if err := a.cancel(j, p.Reason); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) retryWorkflow(p *RetryWorkflow, res *Result) error {
	w, err := a.getWorkflow(p.ID)
	if err != nil {
		return err
	}
	ids, err := a.memberIDs(w.ID)
	if err != nil {
		return err
	}
	var again []string
	for _, id := range ids {
		j, err := a.getJob(id)
		if err != nil {
			continue
		}
		switch j.State {
		case JobFailed, JobCancelled, JobSkipped:
			again = append(again, id)
		}
	}
	if len(again) == 0 {
		return fmt.Errorf("%w: workflow %s has no failed, cancelled or skipped job to retry", ErrConflict, w.ID)
	}
	// First every job back to pending (their children's counts follow),
	// then each one with parents counts them afresh: a job whose parents
	// all succeeded is released now, one whose parent is re-run waits.
	// Jobs are read again each time: a save changes its children. No
	// decision is taken until all are back: a child re-run before its
	// parent would see the parent's old outcome.
	a.holdDecisions = true
	for _, id := range again {
		j, err := a.getJob(id)
		if err != nil {
			return err
		}
		if err := a.rerun(j); err != nil {
			return err
		}
	}
	a.holdDecisions = false
	for _, id := range again {
		cur, err := a.getJob(id)
		if err != nil {
			return err
		}
		if !cur.blocked() {
			continue
		}
		if err := a.countParents(cur); err != nil {
			return err
		}
		if err := a.saveJob(cur, JobWaiting); err != nil {
			return err
		}
	}
	return nil
}

// rerun puts a terminal job back to pending with a fresh attempt budget:
// queued, or waiting (undecided) when it has parents. The caller decides
// the latter (countParents).
func (a *applier) rerun(j *Job) error {
	from := j.State
	j.State, j.Reason, j.CountedAttempts = JobQueued, "", 0
	j.FinishedAt, j.NextRunAt = zeroTime, zeroTime
	if j.Gang != nil {
		j.Gang = &GangStatus{Size: j.Gang.Size, Counted: make([]int, j.Gang.Size), Placements: j.Gang.Placements}
	}
	if j.Deps != nil {
		j.State = JobWaiting
		j.Deps.Decision, j.Deps.DecidedBy = "", ""
	}
	return a.saveJob(j, from)
}

// bucket returns a bucket created on first use (see schema.go).
func (a *applier) bucket(name []byte) (*bolt.Bucket, error) {
	if b := a.tx.Bucket(name); b != nil {
		return b, nil
	}
	a.wrote = true
	return a.tx.CreateBucketIfNotExists(name)
}

// getWorkflow reads a workflow through the entry's memo.
func (a *applier) getWorkflow(id string) (*Workflow, error) {
	if w := a.wfs[id]; w != nil {
		return w, nil
	}
	b := a.tx.Bucket(bucketWorkflows)
	var v []byte
	if b != nil {
		v = b.Get([]byte(id))
	}
	if v == nil {
		return nil, fmt.Errorf("%w: workflow %q", ErrNotFound, id)
	}
	var w Workflow
	if err := decode(v, &w); err != nil {
		return nil, err
	}
	if w.Counts == nil {
		w.Counts = map[JobState]int{}
	}
	a.wfs[id] = &w
	return &w, nil
}

// memberIDs lists a workflow's job IDs in submit order.
func (a *applier) memberIDs(wf string) ([]string, error) {
	var ids []string
	for _, v := range under(a.tx.Bucket(bucketWorkflowJobs), attemptPrefix(wf)) {
		ids = append(ids, string(v))
	}
	return ids, nil
}

// memberChanged counts a workflow job's move from state from ("" for a
// new job) to state to in the workflow's memo record.
func (a *applier) memberChanged(wf string, from, to JobState) error {
	w, err := a.getWorkflow(wf)
	if errors.Is(err, ErrNotFound) {
		return nil // dropped by GC (after all its jobs had finished)
	}
	if err != nil {
		return err
	}
	if from != "" {
		if w.Counts[from]--; w.Counts[from] <= 0 {
			delete(w.Counts, from)
		}
	}
	w.Counts[to]++
	a.wfDirty = true
	return nil
}

// flushWorkflows writes the entry's changed workflow records (in ID
// order) and emits "workflow finished" for those that just finished.
func (a *applier) flushWorkflows() error {
	if !a.wfDirty {
		clear(a.wfs)
		return nil
	}
	b, err := a.bucket(bucketWorkflows)
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(a.wfs)) {
		w := a.wfs[id]
		was := w.State
		w.derive()
		w.ModifyIndex, w.UpdatedAt = a.index, a.at
		switch {
		case w.State != WorkflowRunning && (was == WorkflowRunning || was == ""):
			w.FinishedAt = a.at
			a.emit(Event{Type: EventWorkflow, Name: NameFinished, Workflow: w.ID, State: string(w.State), Namespace: w.Namespace,
				Reason: countsText(w.Counts)})
		case w.State == WorkflowRunning:
			w.FinishedAt = zeroTime
		}
		if err := a.putRecord(b, []byte(w.ID), w); err != nil {
			return err
		}
	}
	clear(a.wfs)
	a.wfDirty = false
	return nil
}

// dropWorkflows forgets the memo of a refused entry.
func (a *applier) dropWorkflows() {
	clear(a.wfs)
	a.wfDirty = false
	a.holdDecisions = false
}

// gcWorkflows drops workflows finished before before, with their member
// lists (their jobs go by their own FinishedAt, at about the same time).
// It reads every workflow record: there are far fewer than jobs.
func (a *applier) gcWorkflows(before time.Time) error {
	b := a.tx.Bucket(bucketWorkflows)
	if b == nil {
		return nil
	}
	var doomed []string
	err := b.ForEach(func(k, v []byte) error {
		var w Workflow
		if err := decode(v, &w); err != nil {
			return err
		}
		if w.State != WorkflowRunning && w.FinishedAt.Before(before) {
			doomed = append(doomed, w.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	members := a.tx.Bucket(bucketWorkflowJobs)
	for _, id := range doomed {
		if err := a.del(b, []byte(id)); err != nil {
			return err
		}
		if members == nil {
			continue
		}
		var keys [][]byte
		prefix := attemptPrefix(id)
		c := members.Cursor()
		for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := a.del(members, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// countsText is "succeeded=4 skipped=2 failed=1", in state order.
func countsText(c map[JobState]int) string {
	s := ""
	for _, st := range []JobState{JobSucceeded, JobFailed, JobCancelled, JobSkipped} {
		if c[st] > 0 {
			if s != "" {
				s += " "
			}
			s += fmt.Sprintf("%s=%d", st, c[st])
		}
	}
	return s
}
