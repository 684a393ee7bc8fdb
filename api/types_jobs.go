package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// JobState is where a job is in its life.
type JobState string

// The job states (docs/api.md, "Jobs").
const (
	JobWaiting   JobState = "waiting"   // on run_at or its dependencies
	JobQueued    JobState = "queued"    // eligible for placement now
	JobRunning   JobState = "running"   // has a live attempt
	JobRetrying  JobState = "retrying"  // its last attempt failed; the next one is due at NextRunAt
	JobSucceeded JobState = "succeeded" // terminal
	JobFailed    JobState = "failed"    // terminal: attempts exhausted or deadline passed
	JobCancelled JobState = "cancelled" // terminal
	JobSkipped   JobState = "skipped"   // terminal: a parent's outcome ruled it out
)

// Terminal reports whether no further attempt will be made without a user
// action (retry).
func (s JobState) Terminal() bool {
	switch s {
	case JobSucceeded, JobFailed, JobCancelled, JobSkipped:
		return true
	}
	return false
}

// AttemptState is where one execution of a job is.
type AttemptState string

// The attempt states.
const (
	AttemptAssigned  AttemptState = "assigned"
	AttemptRunning   AttemptState = "running"
	AttemptSucceeded AttemptState = "succeeded"
	AttemptFailed    AttemptState = "failed"
	AttemptLost      AttemptState = "lost"
	AttemptKilled    AttemptState = "killed"
)

// Duration is a time.Duration that travels as a Go duration string
// ("1m30s"); a bare JSON number is read as seconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string ("1m30s").
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("invalid duration %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Resources is a request (on a job) or a capacity (on a node).
type Resources struct {
	CPU    int64            `json:"cpu,omitempty"`    // millicores
	Memory int64            `json:"memory,omitempty"` // MiB
	Named  map[string]int64 `json:"named,omitempty"`  // countable resources such as gpu
	// GPUs on a submit asks for whole GPUs (named "gpu" by its own name;
	// the leader picks the devices). Responses carry the count in Named.
	GPUs int64 `json:"gpus,omitempty"`
	// GPUMemory is a share of one GPU's memory in MiB (issue 24): on a
	// submit it asks for one (gpus 0 or 1); on a node's allocated, the
	// sum of its live shares.
	GPUMemory int64 `json:"gpu_memory,omitempty"`
}

// GPUShare is an attempt's share of one GPU's memory.
type GPUShare struct {
	GPU       GPU   `json:"gpu"`
	MemoryMiB int64 `json:"memory_mib"` // the share (FOREMAN_GPU_MEMORY_MIB)
}

// GPU is one NVIDIA device: in a node's list (what it detected) or an
// attempt's (the exact devices the leader picked for it).
type GPU struct {
	UUID      string   `json:"uuid"`
	Index     int      `json:"index"` // nvidia-smi's (CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID)
	Minor     int      `json:"minor"` // the N of /dev/nvidiaN
	BusID     string   `json:"bus_id,omitempty"`
	Model     string   `json:"model,omitempty"`
	MemoryMiB int64    `json:"memory_mib,omitempty"`
	Compute   string   `json:"compute,omitempty"` // compute capability, "9.0"
	Health    string   `json:"health,omitempty"`  // "" when healthy
	Links     []string `json:"links,omitempty"`   // to the device of each index, as topo -m prints it
}

// Backoff is a job's retry delay policy: delay(n) =
// min(Initial*Multiplier^(n-1), Max) ± Jitter. Nil fields take the
// server's defaults (1s, ×2, 5m, 0.2).
type Backoff struct {
	Initial    Duration `json:"initial,omitempty"`
	Multiplier *float64 `json:"multiplier,omitempty"`
	Max        Duration `json:"max,omitempty"`
	Jitter     *float64 `json:"jitter,omitempty"` // fraction 0..1 of the delay
}

// Gang asks for Size tasks placed all-or-nothing, on distinct nodes
// unless Spread is false.
type Gang struct {
	Size   int   `json:"size"`
	Spread *bool `json:"spread,omitempty"`
}

// HTTPRequest makes a job an HTTP request (driver "http"). The attempt
// succeeds when the status is in ExpectStatus (empty: any 2xx).
type HTTPRequest struct {
	Method       string            `json:"method,omitempty"` // default GET
	URL          string            `json:"url"`
	Headers      map[string]string `json:"headers,omitempty"`
	Body         string            `json:"body,omitempty"`
	ExpectStatus []int             `json:"expect_status,omitempty"`
}

// Webhook is called on a job's transitions (Events: running, retrying,
// succeeded, failed, cancelled, skipped, or finished for every terminal
// one).
type Webhook struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Secret      string   `json:"secret,omitempty"` // never returned by the server
	MaxAttempts int      `json:"max_attempts,omitempty"`
}

// JobSpec is a job as submitted, and as the server returns it in Job.Spec
// with its defaults filled in. Only Command (or HTTP) is required; see
// docs/api.md "Job spec" for every field's default and limit.
//
// Priority and MaxAttempts are pointers so that 0 can be asked for; nil
// takes the default (50, 3). The server always returns them set.
type JobSpec struct {
	Name      string            `json:"name,omitempty"`
	Namespace string            `json:"namespace,omitempty"` // "": the client's namespace
	Command   []string          `json:"command"`             // argv; see Shell (nil: none, as for an HTTP job)
	Env       map[string]string `json:"env,omitempty"`
	// SecretEnv is set like Env; the server never returns its values.
	SecretEnv        map[string]string `json:"secret_env,omitempty"`
	Resources        *Resources        `json:"resources,omitempty"`
	Priority         *int              `json:"priority,omitempty"` // 0..100
	MaxAttempts      *int              `json:"max_attempts,omitempty"`
	Timeout          Duration          `json:"timeout,omitempty"` // per attempt; 0: none
	Labels           map[string]string `json:"labels,omitempty"`
	Driver           string            `json:"driver,omitempty"` // container, process or http; "": the node's default
	Image            string            `json:"image,omitempty"`
	Network          string            `json:"network,omitempty"` // none (default) or host
	User             string            `json:"user,omitempty"`
	KillSignal       string            `json:"kill_signal,omitempty"`
	KillTimeout      Duration          `json:"kill_timeout,omitempty"`
	Queue            string            `json:"queue,omitempty"`
	Constraints      []string          `json:"constraints,omitempty"` // "zone == a", "gpu_model in (a100,h100)"
	Placement        string            `json:"placement,omitempty"`   // binpack (default) or spread
	Backoff          *Backoff          `json:"backoff,omitempty"`
	NoRetryExitCodes []int             `json:"no_retry_exit_codes,omitempty"`
	RunAt            *time.Time        `json:"run_at,omitempty"`
	Deadline         *time.Time        `json:"deadline,omitempty"`
	AllowUnplaceable bool              `json:"allow_unplaceable,omitempty"`
	// Set by the server on the jobs a schedule fires; never submitted.
	Schedule    string     `json:"schedule,omitempty"`
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	// DependsOn lists the parents: job IDs in SubmitJob, job names of the
	// same workflow in SubmitWorkflow. Condition is success (default),
	// failure, always or one_success.
	DependsOn []string `json:"depends_on,omitempty"`
	Condition string   `json:"condition,omitempty"`
	// After lists jobs submitted earlier, each with what it must end as
	// (SubmitJob only; instead of DependsOn and Condition). A requirement
	// that can no longer be met ends the job cancelled. A job's spec
	// returns its parents in both, in the same order.
	After []AfterDep `json:"after,omitempty"`
	// Singleton: the job waits until the singleton job of the same Name
	// submitted before it in its namespace has ended (SubmitJob only).
	Singleton bool `json:"singleton,omitempty"`
	// Volumes are host volumes the job mounts (an agent's --host-volume
	// NAME): it runs only on nodes that declare them all.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Array makes the job an array of tasks, one per index, each a job
	// of its own (ID JOB.INDEX, $FOREMAN_ARRAY_INDEX).
	Array *ArraySpec `json:"array,omitempty"`

	HTTP   *HTTPRequest `json:"http,omitempty"`
	Notify []Webhook    `json:"notify,omitempty"`
	// Inputs are fetched into the job's working directory before it starts.
	Inputs      []InputSource `json:"inputs,omitempty"`
	Gang        *Gang         `json:"gang,omitempty"`
	Preemptible *bool         `json:"preemptible,omitempty"` // nil: true below priority 50
	// OnGPUError is "keep" (default) or "requeue": what a running attempt
	// does when a GPU it holds turns unhealthy (a critical XID).
	OnGPUError string `json:"on_gpu_error,omitempty"`
	// IdempotencyKey deduplicates submissions: a second submit with the
	// same key answers with the first job. SubmitJob makes one when empty.
	// Never returned (the job carries it as Job.IdempotencyKey).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Shell is the argv that runs s with /bin/sh -c, as the server does with
// a command given as a string.
func Shell(s string) []string { return []string{"/bin/sh", "-c", s} }

// Int returns a pointer to v, for JobSpec's optional numbers.
func Int(v int) *int { return &v }

// Bool returns a pointer to v, for optional flags.
func Bool(v bool) *bool { return &v }

// SubmitResponse is the reply to a submit: the job's ID, and whether the
// idempotency key named a job submitted before (no new job was made).
type SubmitResponse struct {
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
}

// VolumeMount is a job's use of a host volume: mounted at Dest in a
// container (a process job finds the directory in $FOREMAN_VOLUME_<NAME>),
// read-only when the job or the node says so.
type VolumeMount struct {
	Name     string `json:"name"`
	Dest     string `json:"dest"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// AfterDep is one parent of a job submitted with After: On is "ok"
// (succeeded; the default when empty), "any" (any end), "failed" or
// "cancelled".
type AfterDep struct {
	Job string `json:"job"`
	On  string `json:"on,omitempty"`
}

// ArraySpec is an array's indexes, Start to End (inclusive) by Step
// (0 is 1), and how many of its tasks may be live at once (0: no bound).
type ArraySpec struct {
	Start    int `json:"start"`
	End      int `json:"end"`
	Step     int `json:"step,omitempty"`
	Parallel int `json:"parallel,omitempty"`
}

// ArrayStatus follows the tasks of an array job: how many are made
// (Next positions), queued, live, and ended each way; Cancelled also
// counts indexes cancelled before they were made.
type ArrayStatus struct {
	Size      int   `json:"size"`
	Next      int   `json:"next,omitempty"`
	Queued    int   `json:"queued,omitempty"`
	Live      int   `json:"live,omitempty"`
	Succeeded int   `json:"succeeded,omitempty"`
	Failed    int   `json:"failed,omitempty"`
	Cancelled int   `json:"cancelled,omitempty"`
	Stopped   bool  `json:"stopped,omitempty"`
	Excluded  []int `json:"excluded,omitempty"`
	Redo      int   `json:"redo,omitempty"`
}

// ArrayTask links a task to its array job.
type ArrayTask struct {
	Array string `json:"array"`
	Index int    `json:"index"`
}

// ArrayDetail lists where an array's made tasks are, as index lists such
// as "3,7-9".
type ArrayDetail struct {
	Failed    string `json:"failed,omitempty"`
	Cancelled string `json:"cancelled,omitempty"`
	Running   string `json:"running,omitempty"`
	Retrying  string `json:"retrying,omitempty"`
}

// Deps follows the parents of a job with DependsOn.
type Deps struct {
	Parents   int    `json:"parents"`
	Succeeded int    `json:"succeeded,omitempty"`
	Failed    int    `json:"failed,omitempty"`
	Terminal  int    `json:"terminal,omitempty"`
	Decision  string `json:"decision,omitempty"`
	DecidedBy string `json:"decided_by,omitempty"`
}

// GangStatus follows the tasks of a gang job.
type GangStatus struct {
	Size       int      `json:"size"`
	Token      uint64   `json:"token,omitempty"`
	Live       int      `json:"live,omitempty"`
	Succeeded  int      `json:"succeeded,omitempty"`
	Stop       string   `json:"stop,omitempty"`
	Outcome    JobState `json:"outcome,omitempty"`
	Counted    []int    `json:"counted"`
	Placements int      `json:"placements,omitempty"`
}

// GangTask is one task of a gang, on its attempts.
type GangTask struct {
	Index int      `json:"index"`
	Size  int      `json:"size"`
	Port  int      `json:"port"`
	Peers []string `json:"peers"`
}

// Job is one submitted job.
type Job struct {
	ID             string    `json:"id"`
	Spec           JobSpec   `json:"spec"`
	State          JobState  `json:"state"`
	Reason         string    `json:"reason,omitempty"` // why failed or cancelled, or why not placed
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	SubmittedAt    time.Time `json:"submitted_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	FinishedAt     time.Time `json:"finished_at,omitzero"`
	NextRunAt      time.Time `json:"next_run_at,omitzero"` // when a waiting or retrying job is due

	Attempts        int          `json:"attempts"`         // made so far, numbered 1..Attempts
	CountedAttempts int          `json:"counted_attempts"` // those that used up MaxAttempts
	CurrentAttempt  int          `json:"current_attempt,omitempty"`
	ExitCode        *int         `json:"exit_code,omitempty"`
	Workflow        string       `json:"workflow,omitempty"`
	Deps            *Deps        `json:"deps,omitempty"`
	Gang            *GangStatus  `json:"gang,omitempty"`
	Preemptions     int          `json:"preemptions,omitempty"`
	Array           *ArrayStatus `json:"array,omitempty"`
	ArrayTask       *ArrayTask   `json:"array_task,omitempty"`
	// SubmittedBy is the name of the token that submitted the job (under
	// ACLs): the user its usage is accounted to.
	SubmittedBy string `json:"submitted_by,omitempty"`

	CreateIndex uint64 `json:"create_index"`
	ModifyIndex uint64 `json:"modify_index"`
}

// Artifact is a file an attempt left in its artifacts directory.
type Artifact struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Attempt is one execution of a job on one node.
type Attempt struct {
	JobID           string       `json:"job_id"`
	Attempt         int          `json:"attempt"` // 1-based
	Node            string       `json:"node"`
	State           AttemptState `json:"state"`
	Reason          string       `json:"reason,omitempty"`
	FencingToken    uint64       `json:"fencing_token"`
	Counted         bool         `json:"counted"` // false for attempts that do not use up max_attempts (lost)
	CancelRequested string       `json:"cancel_requested,omitempty"`
	Resources       Resources    `json:"resources"`
	AssignedAt      time.Time    `json:"assigned_at"`
	StartedAt       time.Time    `json:"started_at,omitzero"`
	FinishedAt      time.Time    `json:"finished_at,omitzero"`
	ExitCode        *int         `json:"exit_code,omitempty"`
	Signal          string       `json:"signal,omitempty"`
	OOM             bool         `json:"oom,omitempty"`
	PeakMemoryBytes int64        `json:"peak_memory_bytes,omitempty"`
	CPUTimeNs       int64        `json:"cpu_time_ns,omitempty"`
	StderrTail      string       `json:"stderr_tail,omitempty"`
	Result          []byte       `json:"result,omitempty"`
	Warning         string       `json:"warning,omitempty"`
	ModifyIndex     uint64       `json:"modify_index"`
	Artifacts       []Artifact   `json:"artifacts,omitempty"`
	// Outputs says where the artifacts and logs are kept besides Node
	// (an object store); nil: only on Node.
	Outputs  *Outputs  `json:"outputs,omitempty"`
	Task     *GangTask `json:"task,omitempty"`
	GPUs     []GPU     `json:"gpus,omitempty"`      // the devices the leader picked
	GPUShare *GPUShare `json:"gpu_share,omitempty"` // its share of one device, if it asked gpu_memory
}

// Outputs is where an attempt's artifacts and logs were uploaded.
type Outputs struct {
	Store     string         `json:"store"` // s3://bucket/prefix
	State     string         `json:"state"` // pending, stored, partial
	Objects   []StoredObject `json:"objects,omitempty"`
	NotStored []string       `json:"not_stored,omitempty"`
	Error     string         `json:"error,omitempty"`
	StoredAt  time.Time      `json:"stored_at,omitzero"`
}

// StoredObject is one file of an attempt in the object store.
type StoredObject struct {
	Name string `json:"name"` // artifacts/PATH, logs/stdout, logs/stderr
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

// WebhookEvent is what a webhook delivery posts.
type WebhookEvent struct {
	ID       string    `json:"id"`
	Type     string    `json:"type"`
	JobID    string    `json:"job_id"`
	State    JobState  `json:"state"`
	Reason   string    `json:"reason,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Index    uint64    `json:"index"`
	Seq      int       `json:"seq"`
	At       time.Time `json:"at"`
}

// Delivery is one webhook call of a job and where it stands.
type Delivery struct {
	ID          string       `json:"id"`
	Hook        int          `json:"hook"`
	URL         string       `json:"url"`
	Event       WebhookEvent `json:"event"`
	State       string       `json:"state"` // pending, delivered, failed
	Attempts    int          `json:"attempts"`
	MaxAttempts int          `json:"max_attempts"`
	LastStatus  int          `json:"last_status,omitempty"`
	LastError   string       `json:"last_error,omitempty"`
	NextAt      time.Time    `json:"next_at,omitzero"`
	CreatedAt   time.Time    `json:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
}

// JobDetail is a job with its attempts (oldest first) and webhook
// deliveries.
type JobDetail struct {
	Job        Job          `json:"job"`
	Attempts   []Attempt    `json:"attempts"`
	Deliveries []Delivery   `json:"deliveries,omitempty"`
	Array      *ArrayDetail `json:"array,omitempty"`
}

// JobList is one page of jobs, newest first.
type JobList struct {
	Jobs       []Job  `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"` // "" on the last page
}

// JobCounts is how many jobs are in each state (every state, zeros
// included).
type JobCounts struct {
	Counts map[JobState]int `json:"counts"`
	Total  int              `json:"total"`
}

// TaskList is a gang's tasks.
type TaskList struct {
	JobID string       `json:"job_id"`
	Size  int          `json:"size"`
	Token uint64       `json:"token,omitempty"`
	Tasks []TaskStatus `json:"tasks"`
}

// TaskStatus is one task of a gang with its attempts.
type TaskStatus struct {
	Index    int       `json:"index"`
	Latest   *Attempt  `json:"latest,omitempty"`
	Counted  int       `json:"counted"`
	Attempts []Attempt `json:"attempts"`
}

// ArtifactList is the artifacts of one attempt.
type ArtifactList struct {
	JobID      string     `json:"job_id"`
	Attempt    int        `json:"attempt"`
	Node       string     `json:"node"`
	NodeStatus string     `json:"node_status,omitempty"`
	Artifacts  []Artifact `json:"artifacts"`
	TotalBytes int64      `json:"total_bytes"`
	Warning    string     `json:"warning,omitempty"`
	Store      string     `json:"store,omitempty"`  // the object store, when the node uploads
	Stored     string     `json:"stored,omitempty"` // pending, stored, partial
	NotStored  []string   `json:"not_stored,omitempty"`
}

// Queue is a queue's concurrency limit and its running work.
type Queue struct {
	Name       string `json:"name"`
	MaxRunning int    `json:"max_running"` // 0: unlimited
	Running    int    `json:"running"`
}

// InputSource is a file fetched into a job's working directory before it
// starts: from http(s):// or s3://bucket/key, to Dest (relative; "" or a
// trailing "/" keeps the source's file name), checked against Checksum
// (sha256:HEX) when given.
type InputSource struct {
	Source   string `json:"source"`
	Dest     string `json:"dest,omitempty"`
	Checksum string `json:"checksum,omitempty"`
}

// JobGPUUsage is what a running attempt's processes use on each GPU it
// holds, measured by its node from nvidia-smi (never in raft).
type JobGPUUsage struct {
	JobID   string         `json:"job_id"`
	Attempt int            `json:"attempt"`
	Node    string         `json:"node"`
	At      time.Time      `json:"at,omitzero"`
	Devices []GPUDeviceUse `json:"devices"`
	Note    string         `json:"note,omitempty"` // why a value is missing
}

// GPUDeviceUse is one device of the attempt; nil where nvidia-smi cannot say.
type GPUDeviceUse struct {
	UUID        string   `json:"uuid"`
	Index       int      `json:"index"`
	MemoryBytes *int64   `json:"memory_bytes,omitempty"`
	SMRatio     *float64 `json:"sm_ratio,omitempty"` // 0..1 of the device's SM time
}
