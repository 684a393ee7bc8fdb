package fsm

import (
	"time"
)

// JobState is where a job is in its life. See DESIGN.md's vocabulary.
type JobState string

const (
	JobWaiting   JobState = "waiting"   // on run_at or dependencies
	JobQueued    JobState = "queued"    // eligible for placement now
	JobRunning   JobState = "running"   // has a live attempt (assigned or running)
	JobRetrying  JobState = "retrying"  // last attempt failed; next one at NextRunAt
	JobSucceeded JobState = "succeeded" // terminal
	JobFailed    JobState = "failed"    // terminal: attempts exhausted or deadline; the dead-letter list
	JobCancelled JobState = "cancelled" // terminal
	JobSkipped   JobState = "skipped"   // terminal: an upstream job failed
)

// Terminal reports whether no further attempt will be made without a user action.
func (s JobState) Terminal() bool {
	switch s {
	case JobSucceeded, JobFailed, JobCancelled, JobSkipped:
		return true
	}
	return false
}

// Valid reports whether s is one of the known states.
func (s JobState) Valid() bool {
	switch s {
	case JobWaiting, JobQueued, JobRunning, JobRetrying, JobSucceeded, JobFailed, JobCancelled, JobSkipped:
		return true
	}
	return false
}

// Resources is a request (on a job) or a capacity (on a node).
type Resources struct {
	CPU      int64            `json:"cpu,omitempty"`    // millicores
	MemoryMB int64            `json:"memory,omitempty"` // MiB
	Named    map[string]int64 `json:"named,omitempty"`  // countable resources such as gpu=4
	// GPUMemoryMiB asks for a share of one GPU's memory (issue 24): the
	// leader packs shares onto devices (gpu_share.go); 0 asks for none.
	GPUMemoryMiB int64 `json:"gpu_memory,omitempty"`
}

// Backoff is the per-job retry delay policy: delay(n) = min(Initial*Multiplier^(n-1), Max) ± Jitter.
type Backoff struct {
	Initial    Duration `json:"initial,omitempty"`
	Multiplier float64  `json:"multiplier,omitempty"`
	Max        Duration `json:"max,omitempty"`
	Jitter     float64  `json:"jitter,omitempty"` // fraction 0..1 of the delay
}

// JobSpec is what a user submits. It is normalised and validated by the API
// layer (defaults filled in) before it is put into a command, so Apply never
// has to guess. Add new fields with omitempty so old entries still decode.
type JobSpec struct {
	Name string `json:"name,omitempty"`
	// Namespace the job belongs to; "" is the default namespace (stored
	// that way so records from before namespaces need no migration).
	Namespace string            `json:"namespace,omitempty"`
	Command   []string          `json:"command"` // argv; a JSON string becomes ["/bin/sh","-c",s]
	Env       map[string]string `json:"env,omitempty"`
	// SecretEnv is set in the job's environment like Env, but the API
	// never returns its values (docs/security.md, "Hardening"). Stored in
	// the raft log and state like the rest of the spec: not encrypted at rest.
	SecretEnv   map[string]string `json:"secret_env,omitempty"`
	Resources   Resources         `json:"resources,omitempty"`
	Priority    int               `json:"priority"` // 0..100, default 50
	MaxAttempts int               `json:"max_attempts,omitempty"`
	Timeout     Duration          `json:"timeout,omitempty"` // per attempt; 0 = none
	Labels      map[string]string `json:"labels,omitempty"`

	// Execution (issue 3).
	Driver      string   `json:"driver,omitempty"`  // container | process; "" = the node's default
	Image       string   `json:"image,omitempty"`   // OCI ref, oci-layout:DIR or docker-archive:FILE
	Network     string   `json:"network,omitempty"` // none (default) | host
	User        string   `json:"user,omitempty"`
	KillSignal  string   `json:"kill_signal,omitempty"`  // default SIGTERM
	KillTimeout Duration `json:"kill_timeout,omitempty"` // default 10s

	// Scheduling (issue 4).
	Queue            string     `json:"queue,omitempty"`
	Constraints      []string   `json:"constraints,omitempty"` // "zone == a", "gpu_model in (a100,h100)"
	Placement        string     `json:"placement,omitempty"`   // binpack (default) | spread
	Backoff          Backoff    `json:"backoff,omitempty"`
	NoRetryExitCodes []int      `json:"no_retry_exit_codes,omitempty"`
	RunAt            *time.Time `json:"run_at,omitempty"`
	Deadline         *time.Time `json:"deadline,omitempty"`
	AllowUnplaceable bool       `json:"allow_unplaceable,omitempty"`

	// Set by a schedule's fire, never by a submit (issue 14).
	Schedule    string     `json:"schedule,omitempty"`
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"` // the tick
	// Dependencies (issue 15): the parent jobs' IDs and when this job may
	// run once they finish (dag.go). "" means ConditionSuccess.
	DependsOn []string  `json:"depends_on,omitempty"`
	Condition Condition `json:"condition,omitempty"`
	// After gives each parent its own requirement (after.go; `submit
	// --after ID:ok`, Slurm's afterok/afterany/afternotok): one per
	// DependsOn entry, in its order, and Condition empty. A requirement
	// that can no longer be met ends the job cancelled.
	After []AfterDep `json:"after,omitempty"`
	// Singleton: the job waits until the singleton job of the same name
	// submitted before it in its namespace has ended (Slurm's
	// --dependency=singleton): such jobs run one at a time, in submit
	// order. Apply adds that job to DependsOn and After (any).
	Singleton bool `json:"singleton,omitempty"`
	// Volumes are the host volumes the job mounts (volume.go): it is
	// placed only on nodes that declare them all.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Array makes the job an array of tasks, one per index (array.go).
	Array *ArraySpec `json:"array,omitempty"`

	// HTTP jobs and webhooks (issue 12).
	HTTP   *HTTPRequest `json:"http,omitempty"`   // the request of a driver "http" job
	Notify []Webhook    `json:"notify,omitempty"` // webhooks called on the job's transitions
	// Inputs are fetched into the job's working directory before it
	// starts (inputs.go).
	Inputs []InputSource `json:"inputs,omitempty"`

	// Gangs and preemption (issue 18, gang.go).
	Gang *GangSpec `json:"gang,omitempty"` // N tasks placed all-or-nothing
	// Preemptible says whether a higher-priority job may evict this one's
	// attempts; nil means the default: true below DefaultPreemptibleBelow.
	Preemptible *bool `json:"preemptible,omitempty"`

	// OnGPUError is what happens to a live attempt when a GPU it holds
	// turns unhealthy (a critical XID): GPUErrorKeep ("" too) or
	// GPUErrorRequeue (gpu_error.go).
	OnGPUError string `json:"on_gpu_error,omitempty"`
}

// HTTPRequest is an HTTP job: the request one attempt makes. The attempt
// succeeds when the response status is in ExpectStatus (empty: any 2xx).
// The job's Timeout bounds the whole request, body included.
type HTTPRequest struct {
	Method       string            `json:"method"`
	URL          string            `json:"url"`
	Headers      map[string]string `json:"headers,omitempty"`
	Body         string            `json:"body,omitempty"`
	ExpectStatus []int             `json:"expect_status,omitempty"`
}

// Job is the replicated record of one submitted job.
type Job struct {
	ID             string    `json:"id"`
	Spec           JobSpec   `json:"spec"`
	State          JobState  `json:"state"`
	Reason         string    `json:"reason,omitempty"` // why failed/cancelled, or why not placed
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	SubmittedAt    time.Time `json:"submitted_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	FinishedAt     time.Time `json:"finished_at,omitzero"`

	// NextRunAt is when a waiting or retrying job becomes due.
	NextRunAt time.Time `json:"next_run_at,omitzero"`

	// Attempts is the number of attempts created so far (attempt numbers are 1..Attempts).
	Attempts int `json:"attempts"`
	// CountedAttempts is how many attempts used up MaxAttempts (lost ones do not).
	CountedAttempts int `json:"counted_attempts"`
	// Current is the number of the live attempt, or 0.
	Current int `json:"current_attempt,omitempty"`
	// ExitCode of the last finished attempt, if it exited.
	ExitCode *int `json:"exit_code,omitempty"`
	// Workflow is the ID of the workflow the job belongs to ("" for none).
	Workflow string `json:"workflow,omitempty"`
	// Deps follows the parents of a job with DependsOn (dag.go).
	Deps *Deps `json:"deps,omitempty"`
	// Gang follows the tasks of a gang job (gang.go); nil for other jobs.
	Gang *GangStatus `json:"gang,omitempty"`
	// Preemptions counts the attempts of this job that were preempted.
	Preemptions int `json:"preemptions,omitempty"`
	// Array follows the tasks of an array job; ArrayTask links a task to
	// its array (array.go).
	Array     *ArrayStatus `json:"array,omitempty"`
	ArrayTask *ArrayTask   `json:"array_task,omitempty"`
	// SubmittedBy names the token that submitted the job ("" without
	// ACLs, or from a schedule): the user its usage is accounted to,
	// else Spec.User.
	SubmittedBy string `json:"submitted_by,omitempty"`

	CreateIndex uint64 `json:"create_index"`
	ModifyIndex uint64 `json:"modify_index"`
}
