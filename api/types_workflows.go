package api

import "time"

// WorkflowState is where a workflow is.
type WorkflowState string

// The workflow states.
const (
	WorkflowRunning   WorkflowState = "running"
	WorkflowSucceeded WorkflowState = "succeeded"
	WorkflowFailed    WorkflowState = "failed"
	WorkflowCancelled WorkflowState = "cancelled"
)

// WorkflowSpec is a workflow as submitted (all its jobs or none), and a
// schedule's workflow template as the server returns it. A job's
// DependsOn names other jobs of the workflow by Name.
type WorkflowSpec struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace,omitempty"`
	Jobs      []JobSpec `json:"jobs"`
	// IdempotencyKey makes a resent submit answer with the first
	// workflow; SubmitWorkflow makes one when empty. Not part of a
	// schedule's template.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// WorkflowSubmitResponse is the reply to SubmitWorkflow.
type WorkflowSubmitResponse struct {
	ID        string           `json:"id"`
	Duplicate bool             `json:"duplicate"` // the idempotency key named an earlier workflow
	Jobs      []WorkflowJobRef `json:"jobs"`
}

// WorkflowJobRef maps a workflow job's name to its job ID.
type WorkflowJobRef struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

// Workflow is a workflow's record.
type Workflow struct {
	ID          string           `json:"id"`
	Name        string           `json:"name"`
	Namespace   string           `json:"namespace,omitempty"`
	State       WorkflowState    `json:"state"`
	Jobs        int              `json:"jobs"`
	Counts      map[JobState]int `json:"counts"`
	SubmittedAt time.Time        `json:"submitted_at"`
	UpdatedAt   time.Time        `json:"updated_at"`
	FinishedAt  time.Time        `json:"finished_at,omitzero"`
	CreateIndex uint64           `json:"create_index"`
	ModifyIndex uint64           `json:"modify_index"`
}

// WorkflowDetail is a workflow with one page of its jobs.
type WorkflowDetail struct {
	Workflow
	JobList  []WorkflowJobStatus `json:"job_list"`
	NextFrom int                 `json:"next_from,omitempty"` // 0 on the last page
}

// WorkflowJobStatus is one job of a workflow.
type WorkflowJobStatus struct {
	Name      string   `json:"name"`
	ID        string   `json:"id"`
	State     JobState `json:"state"`
	Reason    string   `json:"reason,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"` // names
	Condition string   `json:"condition,omitempty"`
	Decision  string   `json:"decision,omitempty"`
	DecidedBy string   `json:"decided_by,omitempty"` // a name
	Attempts  int      `json:"attempts"`
	ExitCode  *int     `json:"exit_code,omitempty"`
	// Array follows the tasks of an array job.
	Array *ArrayStatus `json:"array,omitempty"`
}

// WorkflowList is one page of workflows, newest first.
type WorkflowList struct {
	Workflows  []Workflow `json:"workflows"`
	NextCursor string     `json:"next_cursor,omitempty"`
}
