package fsm

import (
	"fmt"
	"time"
)

// Workflows (issue 15): a named DAG of named jobs submitted in one raft
// entry. The jobs are ordinary jobs (Job.Workflow names the workflow)
// whose Spec.DependsOn holds their parents' IDs; dag.go releases and
// skips them. The workflow record keeps per-state counts of its jobs,
// updated in saveJob, so its state and "finished" need no scan.

// MaxWorkflowJobs caps the jobs of one workflow: one entry of 10,000 jobs
// is a few MiB of raft log, applied in well under a second.
const MaxWorkflowJobs = 10000

// WorkflowState is where a workflow is, derived from its jobs' states.
type WorkflowState string

const (
	WorkflowRunning   WorkflowState = "running"   // some job is not terminal
	WorkflowSucceeded WorkflowState = "succeeded" // every job succeeded or was skipped, none failed or was cancelled
	WorkflowFailed    WorkflowState = "failed"    // every job is terminal and one failed
	WorkflowCancelled WorkflowState = "cancelled" // every job is terminal, one was cancelled, none failed
)

// Workflow is the replicated record of one workflow.
type Workflow struct {
	ID        string        `json:"id"`
	Name      string        `json:"name"`
	Namespace string        `json:"namespace,omitempty"`
	State     WorkflowState `json:"state"`
	// Jobs is the number of jobs; Counts how many are in each state.
	Jobs        int              `json:"jobs"`
	Counts      map[JobState]int `json:"counts"`
	SubmittedAt time.Time        `json:"submitted_at"`
	UpdatedAt   time.Time        `json:"updated_at"`
	FinishedAt  time.Time        `json:"finished_at,omitzero"`
	CreateIndex uint64           `json:"create_index"`
	ModifyIndex uint64           `json:"modify_index"`
}

// derive sets State from Counts.
func (w *Workflow) derive() {
	terminal := 0
	for s, n := range w.Counts {
		if s.Terminal() {
			terminal += n
		}
	}
	switch {
	case terminal < w.Jobs:
		w.State = WorkflowRunning
	case w.Counts[JobFailed] > 0:
		w.State = WorkflowFailed
	case w.Counts[JobCancelled] > 0:
		w.State = WorkflowCancelled
	default:
		w.State = WorkflowSucceeded
	}
}

// Workflow commands.
const (
	CmdSubmitWorkflow CommandType = "submit_workflow" // SubmitWorkflow
	CmdCancelWorkflow CommandType = "cancel_workflow" // CancelWorkflow
	CmdRetryWorkflow  CommandType = "retry_workflow"  // RetryWorkflow
)

// SubmitWorkflow creates a workflow and all its jobs, or nothing. Each
// job's Spec.Name is its name in the workflow (unique, a path element:
// its children find its result under /foreman/inputs/<name>/) and its
// Spec.DependsOn lists parent IDs among Jobs. Jobs with parents start
// waiting; the rest queued. A workflow ID that exists answers with its
// jobs as duplicates.
type SubmitWorkflow struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace,omitempty"`
	Jobs      []NewJob `json:"jobs"`
	// IdempotencyKey, when set, makes a repeated submit with the same key
	// answer with the first workflow (Result.Workflow, its jobs as
	// duplicates), as for jobs (invariant 5).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// workflowIdemKey is a workflow's key in the idempotency bucket: NUL
// first, which no job key has (the API refuses control characters), so
// the two never collide.
func workflowIdemKey(k string) []byte { return append([]byte("\x00workflow:"), k...) }

// CancelWorkflow cancels every job of the workflow that is not terminal
// (as CancelJob does each). Waiting jobs become cancelled, not skipped.
type CancelWorkflow struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// RetryWorkflow re-runs the workflow's failed, cancelled and skipped jobs
// with a fresh attempt budget; succeeded jobs are kept. A re-run job with
// parents waits for them again (and may be released at once when they
// all succeeded). A workflow with nothing to re-run gives ErrConflict.
type RetryWorkflow struct {
	ID string `json:"id"`
}

// ValidJobName refuses workflow job names that are not a safe path
// element (they name the child's input directory).
func ValidJobName(name string) error {
	if name == "" {
		return fmt.Errorf("empty (every job of a workflow needs a name)")
	}
	if len(name) > 128 {
		return fmt.Errorf("%d bytes (max 128)", len(name))
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%q is not a valid name", name)
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q: use letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

// memberKey is workflow ID + "/" + the job's 8-digit position.
func memberKey(wf string, pos int) []byte { return appendAttemptKey(nil, wf, pos) }
