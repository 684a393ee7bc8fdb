package fsm

import (
	"fmt"
	"strconv"
)

// Workflow returns one workflow, or ErrNotFound.
func (t *Tx) Workflow(id string) (*Workflow, error) {
	var v []byte
	if b := t.tx.Bucket(bucketWorkflows); b != nil {
		v = b.Get([]byte(id))
	}
	return record[Workflow](v, "workflow", id)
}

// ListWorkflows returns up to limit workflows, newest first (IDs are
// ULIDs), starting before cursor ("" = the newest), and the next cursor
// ("" at the end).
func (t *Tx) ListWorkflows(cursor string, limit int) ([]Workflow, string, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	b := t.tx.Bucket(bucketWorkflows)
	if b == nil {
		return nil, "", nil
	}
	var out []Workflow
	c := b.Cursor()
	var k, v []byte
	if cursor == "" {
		k, v = c.Last()
	} else {
		k, v = c.Seek([]byte(cursor))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for k != nil && string(k) >= cursor {
			k, v = c.Prev()
		}
	}
	for ; k != nil; k, v = c.Prev() {
		if len(out) == limit {
			return out, out[len(out)-1].ID, nil
		}
		var w Workflow
		if err := decode(v, &w); err != nil {
			return nil, "", err
		}
		out = append(out, w)
	}
	return out, "", nil
}

// WorkflowJob is one job of a workflow at its position.
type WorkflowJob struct {
	Pos int
	Job *Job // nil when the job was dropped by GC
	ID  string
}

// WorkflowJobs returns up to limit jobs of a workflow in submit order,
// starting at position from, and the next position (0 at the end).
func (t *Tx) WorkflowJobs(id string, from, limit int) ([]WorkflowJob, int, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	b := t.tx.Bucket(bucketWorkflowJobs)
	if b == nil {
		return nil, 0, nil
	}
	var out []WorkflowJob
	prefix := attemptPrefix(id)
	c := b.Cursor()
	for k, v := c.Seek(memberKey(id, from)); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
		pos, err := strconv.Atoi(string(k[len(prefix):]))
		if err != nil {
			return nil, 0, fmt.Errorf("%w: workflow member key %q", ErrCorrupt, k)
		}
		if len(out) == limit {
			return out, pos, nil
		}
		wj := WorkflowJob{Pos: pos, ID: string(v)}
		if j, err := t.Job(string(v)); err == nil {
			wj.Job = j
		}
		out = append(out, wj)
	}
	return out, 0, nil
}

// JobNames maps job IDs to their spec names (for the edges of a listing).
func (t *Tx) JobNames(ids []string) map[string]string {
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		if _, ok := out[id]; ok {
			continue
		}
		if s, err := t.JobSpec(id); err == nil {
			out[id] = s.Name
		}
	}
	return out
}
