package fsm

import (
	"fmt"
	"iter"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The two helpers every transition goes through, so the secondary indexes
// (jobs_by_state, live_attempts_by_node) can never drift from the records.

// getJob reads a job for modification. Its Spec holds only the fields
// Apply uses (schedSpec, jobrecord.go), and saveJob writes the spec back as
// it was stored: Apply never changes a stored job's spec.
func (a *applier) getJob(id string) (*Job, error) {
	v := a.get(a.jobs, []byte(id))
	if v == nil {
		return nil, fmt.Errorf("%w: job %q", ErrNotFound, id)
	}
	j, raw, err := decodeStoredJob(v)
	if err != nil {
		return nil, err
	}
	a.rememberDue(j)
	if raw != nil {
		if a.specOf == nil {
			a.specOf = map[*Job][]byte{}
		}
		a.specOf[j] = raw
	}
	a.noteJob(j)
	return j, nil
}

// saveJob writes j, whose state before this entry was from ("" for a new
// job), stamps ModifyIndex/UpdatedAt, moves its index entry and emits an
// event when the state changed.
func (a *applier) saveJob(j *Job, from JobState) error {
	if j.State == JobQueued && j.Spec.Array != nil && j.ArrayTask == nil {
		if err := a.startArray(j); err != nil {
			return err
		}
	}
	j.ModifyIndex = a.index
	j.UpdatedAt = a.at
	if j.State.Terminal() && !from.Terminal() {
		j.FinishedAt = a.at
	}
	v, err := encodeJob(j, a.specOf[j])
	if err != nil {
		return err
	}
	if err := a.indexSchedJob(j, from); err != nil {
		return err
	}
	if err := a.put(a.jobs, []byte(j.ID), v); err != nil {
		return err
	}
	if from == j.State {
		return nil
	}
	if from != "" {
		if err := a.del(a.byState, jobStateKey(from, j.ID)); err != nil {
			return err
		}
	}
	if err := a.put(a.byState, jobStateKey(j.State, j.ID), nil); err != nil {
		return err
	}
	a.emit(Event{Type: EventJob, Name: jobEventName(from, j.State), JobID: j.ID, Attempt: j.Attempts, State: string(j.State), Reason: j.Reason, Workflow: j.Workflow, Namespace: j.Spec.Namespace})
	a.noteJob(j)
	if len(j.Spec.Notify) > 0 {
		if err := a.queueDeliveries(j, len(a.pending)-1); err != nil {
			return err
		}
	}
	if j.Workflow != "" {
		if err := a.memberChanged(j.Workflow, from, j.State); err != nil {
			return err
		}
	}
	// A parent's outcome moves its children (dag.go). A new job has no
	// children yet.
	if fo, to := outcomeOf(from), outcomeOf(j.State); fo != to {
		if err := a.parentChanged(j, fo, to); err != nil {
			return err
		}
	}
	if j.ArrayTask != nil && from != "" && !a.quietTasks {
		return a.taskMoved(j, from)
	}
	return nil
}

// deleteJob removes a job, its attempts and all its index entries.
func (a *applier) deleteJob(j *Job) error {
	if err := a.del(a.jobs, []byte(j.ID)); err != nil {
		return err
	}
	if err := a.del(a.byState, jobStateKey(j.State, j.ID)); err != nil {
		return err
	}
	if err := a.unindexSchedJob(j); err != nil {
		return err
	}
	if err := a.unlinkJob(j); err != nil {
		return err
	}
	if err := a.deleteTimeline(j.ID); err != nil {
		return err
	}
	if err := a.deleteDeliveries(j.ID); err != nil {
		return err
	}
	if err := a.deleteCheckpoint(j.ID); err != nil {
		return err
	}
	prefix := attemptPrefix(j.ID)
	c := a.attempts.Cursor()
	var keys [][]byte
	for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
		var at Attempt
		if err := decodeAttempt(v, &at); err != nil {
			return err
		}
		if at.State.Live() {
			if err := a.del(a.live, liveKey(at.Node, at.JobID, at.Num)); err != nil {
				return err
			}
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := a.del(a.attempts, k); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) getAttempt(jobID string, num int) (*Attempt, error) {
	v := a.get(a.attempts, attemptKey(jobID, num))
	if v == nil {
		return nil, fmt.Errorf("%w: attempt %s/%d", ErrNotFound, jobID, num)
	}
	return decodedAttempt(v)
}

// saveAttempt writes an attempt whose previous state was from ("" for a
// new attempt) and keeps live_attempts_by_node in step.
func (a *applier) saveAttempt(at *Attempt, from AttemptState) error {
	at.ModifyIndex = a.index
	v, err := encodeAttempt(at)
	if err != nil {
		return err
	}
	if err := a.put(a.attempts, attemptKey(at.JobID, at.Num), v); err != nil {
		return err
	}
	switch {
	case at.State.Live() && !from.Live():
		err = a.put(a.live, liveKey(at.Node, at.JobID, at.Num), nil)
	case !at.State.Live() && from.Live():
		err = a.del(a.live, liveKey(at.Node, at.JobID, at.Num))
	}
	if err != nil {
		return err
	}
	var use *Usage
	if from.Live() && !at.State.Live() {
		// The one place an attempt ends: accounted exactly once.
		if use, err = a.accountAttempt(at); err != nil {
			return err
		}
	}
	if from != at.State {
		a.emit(Event{Type: EventAttempt, Name: attemptEventName(from, at.State), JobID: at.JobID, Attempt: at.Num, Node: at.Node, State: string(at.State), Reason: at.Reason, Namespace: a.namespaceOf(at.JobID), use: use})
	}
	return nil
}

// jobIdent is what the batch remembers of a job it read or wrote: its
// namespace (attempt events) and the user and labels its usage is
// accounted to. None of them ever changes for a job.
type jobIdent struct {
	ns, user string
	labels   map[string]string // when spec is nil
	spec     []byte            // the stored spec, its labels still encoded
}

// noteJob remembers j for the rest of the batch.
func (a *applier) noteJob(j *Job) { a.noteJobSpec(j, a.specOf[j]) }

// noteJobSpec remembers j, whose stored spec is raw (nil: j.Spec is
// whole).
func (a *applier) noteJobSpec(j *Job, raw []byte) jobIdent {
	if a.jobMemo == nil {
		a.jobMemo = map[string]jobIdent{}
	}
	id := jobIdent{ns: j.Spec.Namespace, user: j.SubmittedBy, spec: raw}
	if id.user == "" {
		id.user = j.Spec.User
	}
	if id.spec == nil {
		id.labels = j.Spec.Labels
	}
	a.jobMemo[j.ID] = id
	return id
}

// identOf is a job's jobIdent, read through the batch's memo: the job is
// almost always read already.
func (a *applier) identOf(jobID string) (jobIdent, error) {
	if id, ok := a.jobMemo[jobID]; ok {
		return id, nil
	}
	v := a.get(a.jobs, []byte(jobID))
	if v == nil {
		return jobIdent{}, fmt.Errorf("%w: job %q", ErrNotFound, jobID)
	}
	j, raw, err := decodeStoredJob(v)
	if err != nil {
		return jobIdent{}, err
	}
	return a.noteJobSpec(j, raw), nil
}

// namespaceOf is the stored namespace of a job ("" = default).
func (a *applier) namespaceOf(jobID string) string {
	id, err := a.identOf(jobID)
	if err != nil {
		return ""
	}
	return id.ns
}

func hasPrefix(k, prefix []byte) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix)
}

// under yields b's keys and values that start with prefix, in key order
// (none if b is nil). The slices are bolt's: valid only for the
// transaction, and the loop must not modify b.
func under(b *bolt.Bucket, prefix []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		if b == nil {
			return
		}
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
			if !yield(k, v) {
				return
			}
		}
	}
}

// decodeUnder decodes every value under prefix in b, in key order (nil if
// there are none or b is nil).
func decodeUnder[T any](b *bolt.Bucket, prefix []byte) ([]T, error) {
	var out []T
	for _, v := range under(b, prefix) {
		var x T
		if err := decode(v, &x); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// zeroTime clears time fields (encoded as absent thanks to omitzero).
var zeroTime time.Time
