package fsm

import "time"

// AttemptState is where one execution of a job is.
type AttemptState string

const (
	AttemptAssigned  AttemptState = "assigned"  // placed on a node, not yet reported running
	AttemptRunning   AttemptState = "running"   // the node reported it started
	AttemptSucceeded AttemptState = "succeeded" // exit 0
	AttemptFailed    AttemptState = "failed"    // non-zero exit or could not start
	AttemptLost      AttemptState = "lost"      // its node died; the lease guarantees it stopped
	AttemptKilled    AttemptState = "killed"    // see Reason: timeout, oom, cancelled, preempted, fenced
)

// Kill reasons recorded on killed attempts (and failed jobs where relevant).
const (
	ReasonTimeout   = "timeout"
	ReasonOOM       = "oom"
	ReasonCancelled = "cancelled"
	ReasonPreempted = "preempted"
	ReasonFenced    = "fenced"
	ReasonDeadline  = "deadline"
	ReasonDrained   = "drained"
	// ReasonGang stops the live siblings of a gang task that ended.
	ReasonGang = "gang"
	// ReasonGPUError stops an attempt whose job asked to be requeued when
	// a GPU it holds turns unhealthy; the stop request (and so the killed
	// attempt's reason) reads "gpu_error: <device>: <why>" (gpu_error.go).
	ReasonGPUError = "gpu_error"
)

// Live reports whether the attempt may still be executing.
func (s AttemptState) Live() bool { return s == AttemptAssigned || s == AttemptRunning }

// StderrTailMax is how much of an attempt's stderr is kept in the state machine.
const StderrTailMax = 4096

// ResultMax is the most of a job's result kept with its attempt (in raft,
// so it survives the node): 64 KiB. More is truncated with a warning.
const ResultMax = 64 << 10

// Attempt is one execution of a job on one node.
type Attempt struct {
	JobID string       `json:"job_id"`
	Num   int          `json:"attempt"` // 1-based
	Node  string       `json:"node"`
	State AttemptState `json:"state"`
	// Reason explains killed/failed/lost (e.g. "oom", "timeout", "image not found").
	Reason string `json:"reason,omitempty"`
	// FencingToken is the raft index of the entry that assigned this attempt.
	// It is unique and increases for each new attempt of a job.
	FencingToken uint64 `json:"fencing_token"`
	// Counted is false for attempts that do not use up max_attempts (lost).
	Counted bool `json:"counted"`
	// CancelRequested is set when the job was cancelled (or the node drained past
	// its deadline) while this attempt was live: the node must kill it.
	CancelRequested string `json:"cancel_requested,omitempty"`

	Resources Resources `json:"resources"` // what was allocated on the node

	AssignedAt time.Time `json:"assigned_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`

	ExitCode    *int   `json:"exit_code,omitempty"`
	Signal      string `json:"signal,omitempty"`
	OOM         bool   `json:"oom,omitempty"`
	PeakMemoryB int64  `json:"peak_memory_bytes,omitempty"`
	CPUTimeNs   int64  `json:"cpu_time_ns,omitempty"`
	StderrTail  string `json:"stderr_tail,omitempty"`
	// Result is what the job wrote to its result file (children get it
	// as an input); Warning says what went wrong with it.
	Result      []byte `json:"result,omitempty"`
	Warning     string `json:"warning,omitempty"`
	ModifyIndex uint64 `json:"modify_index"`
	// Artifacts lists the files the attempt left in its artifacts
	// directory; the bytes stay on Node (artifact.go).
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Outputs says where the artifacts and logs are kept besides Node,
	// when the node has an object store (outputs.go); nil: only on Node.
	Outputs *Outputs `json:"outputs,omitempty"`
	// Task is set on the attempts of a gang's tasks (gang.go).
	Task *GangTask `json:"task,omitempty"`
	// GPUs are the exact devices the leader picked for this attempt from
	// its node's GPUs (copies, so the node isolates them without a lookup);
	// freed when the attempt ends.
	GPUs []GPU `json:"gpus,omitempty"`
	// GPUShare is the device whose memory share the attempt holds (a job
	// asking resources.gpu_memory), nil for none; freed when it ends.
	GPUShare *GPUShare `json:"gpu_share,omitempty"`
}
