package fsm

import "fmt"

// JobResult returns the result of the job's last finished attempt (the
// one that decided the job's state) and that attempt's number, or
// ErrNotFound when no attempt has finished.
func (t *Tx) JobResult(jobID string) ([]byte, int, error) {
	at, err := t.LastFinishedAttempt(jobID)
	if err != nil {
		return nil, 0, err
	}
	return at.Result, at.Num, nil
}

// LastFinishedAttempt returns the job's last attempt that is no longer
// live (the one that decided the job's state, whose result and artifacts
// its children get), or ErrNotFound when none has finished.
func (t *Tx) LastFinishedAttempt(jobID string) (*Attempt, error) {
	c := t.tx.Bucket(bucketAttempts).Cursor()
	prefix := attemptPrefix(jobID)
	// The attempts of a job sort by number: walk back from the last.
	k, v := c.Seek(append(append([]byte(nil), prefix...), 0xff))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	for ; k != nil && hasPrefix(k, prefix); k, v = c.Prev() {
		var at Attempt
		if err := decodeAttempt(v, &at); err != nil {
			return nil, err
		}
		if !at.State.Live() {
			return &at, nil
		}
	}
	if t.tx.Bucket(bucketJobs).Get([]byte(jobID)) == nil {
		return nil, fmt.Errorf("%w: job %q", ErrNotFound, jobID)
	}
	return nil, fmt.Errorf("%w: job %s has no finished attempt", ErrNotFound, jobID)
}

// JobInput is one parent's result for a child (exec writes it as
// <inputs>/<Name>/result).
type JobInput struct {
	Name   string // the parent's name, or its ID when the name is not a safe, unique path element
	JobID  string
	Result []byte
	// Attempt, Node and Artifacts say which files the parent's deciding
	// attempt left and where (exec copies them into <inputs>/<Name>/).
	Attempt   int
	Node      string
	Artifacts []Artifact
	Outputs   *Outputs // where else they are (an object store); nil: only on Node
}

// JobInputs returns the results of spec's parents that have a finished
// attempt, in DependsOn order.
func (t *Tx) JobInputs(spec *JobSpec) ([]JobInput, error) {
	if len(spec.DependsOn) == 0 {
		return nil, nil
	}
	out := make([]JobInput, 0, len(spec.DependsOn))
	used := map[string]bool{}
	for _, pid := range spec.DependsOn {
		ps, err := t.JobSpec(pid)
		if err != nil {
			continue // dropped by GC
		}
		at, err := t.LastFinishedAttempt(pid)
		if err != nil {
			continue
		}
		name := ps.Name
		if ValidJobName(name) != nil || used[name] {
			name = pid
		}
		used[name] = true
		out = append(out, JobInput{Name: name, JobID: pid, Result: at.Result, Attempt: at.Num, Node: at.Node, Artifacts: at.Artifacts, Outputs: at.Outputs})
	}
	return out, nil
}
