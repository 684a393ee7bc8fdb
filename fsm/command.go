package fsm

import (
	"encoding/json"
	"fmt"
	"time"
)

// CommandVersion is the envelope version this binary writes. Apply accepts
// every version up to it and refuses newer ones (a newer leader's entries
// must not be half-understood by an older follower).
//
// Version 2: envelope and payload are CBOR (codec.go). Version 1 was JSON;
// such entries (a log written before the upgrade) are still read and
// applied as before, see decodeCommandV1.
const CommandVersion = 2

// CommandType names one kind of state change. Every type is listed in
// payloadTypes below with its payload.
type CommandType string

const (
	CmdInit       CommandType = "init"        // InitCluster
	CmdSubmitJobs CommandType = "submit_jobs" // SubmitJobs
	CmdUpsertNode CommandType = "upsert_node" // UpsertNode
	CmdNodeState  CommandType = "node_state"  // SetNodeState
	CmdPlace      CommandType = "place"       // Place
	CmdReport     CommandType = "report"      // ReportAttempt
	CmdRelease    CommandType = "release"     // ReleaseJobs
	CmdCancelJob  CommandType = "cancel_job"  // CancelJob
	CmdRetryJob   CommandType = "retry_job"   // RetryJob
	CmdMarkLost   CommandType = "mark_lost"   // MarkLost
	CmdFailJobs   CommandType = "fail_jobs"   // FailJobs
	CmdSetReasons CommandType = "set_reasons" // SetReasons
	CmdSetQueue   CommandType = "set_queue"   // SetQueue
	CmdGC         CommandType = "gc"          // GC
	// CmdLeader records that a new leader took office, so the event
	// stream shows leader changes in log order on every node.
	CmdLeader CommandType = "leader" // LeaderChanged
	// CmdNodeGPUs records the devices a node detected (issue 24).
	CmdNodeGPUs CommandType = "node_gpus" // NodeGPUs
)

// CmdSubmitGroup is many independent submits in one entry (the leader's
// group commit); each member succeeds or is refused on its own.
const CmdSubmitGroup CommandType = "submit_group" // SubmitGroup

// payloadTypes registers the payload of every command type (one line per
// type, next to its handler case in applyEntry). The codec tests fill and
// round-trip each of them, and fail for a CommandType constant missing here.
var payloadTypes = map[CommandType]any{
	CmdInit:          InitCluster{},
	CmdLeader:        LeaderChanged{},
	CmdSubmitJobs:    SubmitJobs{},
	CmdSubmitGroup:   SubmitGroup{},
	CmdUpsertNode:    UpsertNode{},
	CmdNodeState:     SetNodeState{},
	CmdNodeGPUs:      NodeGPUs{},
	CmdSilentClients: SilentClients{},
	CmdNodeStates:    SetNodeStates{},
	CmdExecAudit:     ExecAudit{},
	CmdResetGPUs:     ResetGPUs{},
	CmdPlace:         Place{},
	CmdReport:        ReportAttempt{},
	CmdReportBatch:   ReportAttempts{},
	CmdRelease:       ReleaseJobs{},
	CmdCancelJob:     CancelJob{},
	CmdRetryJob:      RetryJob{},
	CmdMarkLost:      MarkLost{},
	CmdFailJobs:      FailJobs{},
	CmdSetReasons:    SetReasons{},
	CmdSetQueue:      SetQueue{},
	CmdStopAttempts:  StopAttempts{},
	CmdGC:            GC{},

	CmdPutSchedule:    PutSchedule{},
	CmdDeleteSchedule: DeleteSchedule{},
	CmdPauseSchedule:  PauseSchedule{},
	CmdFireSchedules:  FireSchedules{},
	CmdSubmitWorkflow: SubmitWorkflow{},
	CmdCancelWorkflow: CancelWorkflow{},
	CmdRetryWorkflow:  RetryWorkflow{},
	CmdDeliveries:     DeliveryOutcomes{},

	CmdACLBootstrap:   ACLBootstrap{},
	CmdACLCreateToken: ACLCreateToken{},
	CmdACLRevokeToken: ACLRevokeToken{},
	CmdACLInternal:    ACLInternal{},
	CmdSetCheckpoint:  SetCheckpoint{},

	CmdSetNamespace:    SetNamespace{},
	CmdDeleteNamespace: DeleteNamespace{},

	CmdStartUsage: StartUsage{},
}

// Command is the versioned envelope of every raft entry. At is stamped by
// the leader (or the node that builds the command) and is the only notion of
// "now" that Apply may use.
type Command struct {
	V    int         `json:"v"`
	Type CommandType `json:"t"`
	At   time.Time   `json:"at"`
	// Payload is the encoded payload (its format depends on V): read it
	// with DecodePayload.
	Payload []byte `json:"p"`
}

// NewCommand builds an envelope around payload.
func NewCommand(t CommandType, at time.Time, payload any) (*Command, error) {
	b, err := encMode.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", t, err)
	}
	return &Command{V: CommandVersion, Type: t, At: at.UTC(), Payload: b}, nil
}

// Encode returns the bytes that go into the raft log. The same command
// always gives the same bytes.
func (c *Command) Encode() ([]byte, error) {
	if c.V == 1 {
		return nil, fmt.Errorf("%w: version 1 commands are read, never written", ErrBadCommand)
	}
	return encMode.Marshal(c)
}

// DecodePayload decodes the payload into v (a pointer to the type that
// payloadTypes lists for c.Type). Errors wrap ErrBadCommand.
func (c *Command) DecodePayload(v any) error {
	var err error
	if c.V == 1 {
		err = json.Unmarshal(c.Payload, v)
	} else {
		err = decMode.Unmarshal(c.Payload, v)
	}
	if err != nil {
		return fmt.Errorf("%w: %s payload: %v", ErrBadCommand, c.Type, err)
	}
	return nil
}

// DecodeCommand parses raft log bytes: a CBOR envelope, or a version 1
// JSON one. Anything else, and any version above CommandVersion, is an
// error (ErrBadCommand, ErrUnsupportedVersion), never a panic.
func DecodeCommand(b []byte) (*Command, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrBadCommand)
	}
	if b[0] == '{' {
		return decodeCommandV1(b)
	}
	var c Command
	if err := decMode.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	if c.V > CommandVersion {
		return nil, fmt.Errorf("%w: version %d (this binary understands up to %d)", ErrUnsupportedVersion, c.V, CommandVersion)
	}
	if c.V < 2 {
		return nil, fmt.Errorf("%w: version %d in a CBOR envelope", ErrBadCommand, c.V)
	}
	return &c, nil
}

// decodeCommandV1 reads the JSON envelope that foreman wrote before
// CommandVersion 2, so a log (or a follower catching up) from before an
// upgrade still applies exactly as the old binary applied it.
func decodeCommandV1(b []byte) (*Command, error) {
	var env struct {
		V       int             `json:"v"`
		Type    CommandType     `json:"t"`
		At      time.Time       `json:"at"`
		Payload json.RawMessage `json:"p"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	if env.V > CommandVersion {
		return nil, fmt.Errorf("%w: version %d (this binary understands up to %d)", ErrUnsupportedVersion, env.V, CommandVersion)
	}
	if env.V != 1 {
		return nil, fmt.Errorf("%w: version %d in a JSON envelope (only version 1 was JSON)", ErrBadCommand, env.V)
	}
	return &Command{V: 1, Type: env.Type, At: env.At, Payload: env.Payload}, nil
}

// InitCluster records the cluster's identity; Apply ignores it once set.
type InitCluster struct {
	ClusterID string `json:"cluster_id"`
}

// LeaderChanged is committed by a new leader once per term. It changes no
// state; its event is how the stream reports leader changes.
type LeaderChanged struct {
	Node string `json:"node"`
	Term uint64 `json:"term"`
}

// SubmitJobs creates jobs. IDs and SubmittedAt are stamped by the leader.
// A job with an IdempotencyKey that is already known (and not expired at
// Command.At) is not created again: its result points at the original job.
// A job with a RunAt in the future starts in waiting; otherwise queued.
type SubmitJobs struct {
	Jobs []NewJob `json:"jobs"`
}

// SubmitGroup is independent submits that the leader merged into one entry
// (group commit: one log write, one replication round and one apply for
// many clients). Each member is applied exactly as a SubmitJobs entry of its
// own would be, in order, so a later member sees the jobs and idempotency
// keys of the earlier ones (a key repeated across members answers with the
// first member's job). A member stays all-or-nothing, and a member that
// Apply refuses changes nothing and leaves the others alone: its outcome is
// Result.Submits[i].Refused.
type SubmitGroup struct {
	Submits []SubmitJobs `json:"submits"`
}

// NewJob is one job inside SubmitJobs.
type NewJob struct {
	ID             string  `json:"id"`
	Spec           JobSpec `json:"spec"`
	IdempotencyKey string  `json:"idempotency_key,omitempty"`
	// SubmittedBy is the name of the token that submitted the job (the
	// API fills it; "" without ACLs), the user usage is accounted to.
	SubmittedBy string `json:"submitted_by,omitempty"`
}

// UpsertNode creates or updates a node's self-description (addresses,
// capacity, labels, drivers, version). It keeps the leader-owned fields
// (Eligibility, DrainDeadline) of an existing record; a new record starts
// alive and eligible. It sets Gossip to alive.
type UpsertNode struct {
	Node Node `json:"node"`
	// KeepGPUs keeps the record's GPUs, driver and CUDA versions instead
	// of Node's: gossip, from which the leader upserts raft members,
	// cannot carry a device list (512 bytes of meta), so those members
	// send theirs in NodeGPUs. A client's hello carries its own.
	KeepGPUs bool `json:"keep_gpus,omitempty"`
}

// NodeGPUs replaces the GPUs (and driver and CUDA versions) of an existing
// node: what its detection found at start, every 30 s and on SIGHUP.
type NodeGPUs struct {
	Name        string `json:"name"`
	GPUs        []GPU  `json:"gpus,omitempty"`
	GPUDriver   string `json:"gpu_driver,omitempty"`
	CUDAVersion string `json:"cuda_version,omitempty"`
	// GPUMemoryMode is how the node enforces VRAM shares (Node.GPUMemoryMode).
	GPUMemoryMode string `json:"gpu_memory_mode,omitempty"`
}

// SetNodeState changes the leader/user-owned fields of a node. Empty fields
// are left unchanged. Draining with a deadline records DrainDeadline.
type SetNodeState struct {
	Name          string      `json:"name"`
	Gossip        GossipState `json:"gossip,omitempty"`
	Eligibility   Eligibility `json:"eligibility,omitempty"`
	DrainDeadline time.Time   `json:"drain_deadline,omitzero"`
}

// Place creates one new attempt per placement. Apply skips (and reports in
// the result) a placement whose job is not queued, or not waiting/retrying
// and due (NextRunAt <= At), or whose node is not alive+eligible. The new
// attempt's FencingToken is the raft index of this entry; the job becomes
// running with Current = the new attempt number.
type Place struct {
	Placements []Placement `json:"placements"`
}

// Placement is one (job → node) decision.
type Placement struct {
	JobID     string    `json:"job_id"`
	Node      string    `json:"node"`
	Resources Resources `json:"resources"`
	// GPUs are the UUIDs of the node's devices the attempt gets (the
	// leader's pick); Apply copies those devices into Attempt.GPUs.
	GPUs []string `json:"gpus,omitempty"`
	// GPUShare is the UUID of the device whose memory share
	// (Resources.GPUMemoryMiB) the attempt gets; Apply checks it fits.
	GPUShare string `json:"gpu_share,omitempty"`
	// Tasks places a gang: one slot per task, in task order (Node is
	// Tasks[0].Node). Apply places all of them or none (gang.go).
	Tasks []TaskSlot `json:"tasks,omitempty"`
}

// ReportAttempt is an executor's report about its attempt. Apply rejects
// (ErrStaleToken) a report whose token is not the job's current attempt's
// token, or whose attempt is no longer live. State running marks the attempt
// running; a terminal state finishes the attempt and moves the job:
//   - succeeded → job succeeded
//   - killed with reason cancelled → job cancelled
//   - failed/killed otherwise → retrying (NextRunAt = At + backoff, with a
//     deterministic jitter derived from job ID and attempt) while
//     CountedAttempts < MaxAttempts and the exit code is not in
//     NoRetryExitCodes; else failed.
type ReportAttempt struct {
	JobID        string       `json:"job_id"`
	Attempt      int          `json:"attempt"`
	FencingToken uint64       `json:"fencing_token"`
	Node         string       `json:"node"`
	State        AttemptState `json:"state"`
	Reason       string       `json:"reason,omitempty"`
	StartedAt    time.Time    `json:"started_at,omitzero"`
	FinishedAt   time.Time    `json:"finished_at,omitzero"`
	ExitCode     *int         `json:"exit_code,omitempty"`
	Signal       string       `json:"signal,omitempty"`
	OOM          bool         `json:"oom,omitempty"`
	PeakMemoryB  int64        `json:"peak_memory_bytes,omitempty"`
	CPUTimeNs    int64        `json:"cpu_time_ns,omitempty"`
	StderrTail   string       `json:"stderr_tail,omitempty"` // at most StderrTailMax bytes
	// Result is what the job wrote to its result file, at most ResultMax
	// bytes; ResultTruncated says it wrote more (the attempt then carries
	// a warning).
	Result          []byte `json:"result,omitempty"`
	ResultTruncated bool   `json:"result_truncated,omitempty"`
	// Artifacts lists the files kept in the attempt's artifacts directory
	// (at most ArtifactsMaxFiles; bad entries are dropped with a warning);
	// ArtifactsWarning is the executor's note about what it did not keep.
	Artifacts        []Artifact `json:"artifacts,omitempty"`
	ArtifactsWarning string     `json:"artifacts_warning,omitempty"`
	// Outputs: on a finish, that the node uploads the outputs (pending);
	// on a report with State ReportOutputs, where they were stored.
	Outputs *Outputs `json:"outputs,omitempty"`
	// GPUMemoryOver: on a report with State ReportGPUMemoryOver, what the
	// node's watchdog saw (gpu_memory_over.go).
	GPUMemoryOver *GPUMemoryOver `json:"gpu_memory_over,omitempty"`
}

// ReleaseJobs moves waiting or retrying jobs whose NextRunAt <= At to
// queued. Jobs in other states are ignored.
type ReleaseJobs struct {
	JobIDs []string `json:"job_ids"`
}

// CancelJob cancels a non-terminal job. A job without a live attempt becomes
// cancelled at once; one with a live attempt gets CancelRequested=cancelled on
// that attempt and becomes cancelled when the node reports it killed (or when
// the attempt is marked lost).
type CancelJob struct {
	JobID  string `json:"job_id"`
	Reason string `json:"reason,omitempty"`
	// Indexes cancels only these tasks of an array job (array.go).
	Indexes []int `json:"indexes,omitempty"`
}

// RetryJob re-queues a failed or cancelled job with a fresh attempt budget
// (CountedAttempts = 0). Other states give ErrConflict.
type RetryJob struct {
	JobID string `json:"job_id"`
	// Indexes retries only these tasks of an array job (array.go).
	Indexes []int `json:"indexes,omitempty"`
}

// MarkLost marks live attempts on a node as lost (the leader has waited out
// the lease). Each named attempt that is still live becomes lost (not
// counted) and its job is queued again (or cancelled, if a cancel was
// requested). Entries whose token is not current are ignored.
type MarkLost struct {
	Node     string       `json:"node"`
	Attempts []AttemptRef `json:"attempts"`
	Reason   string       `json:"reason,omitempty"`
}

// AttemptRef names one attempt with its token.
type AttemptRef struct {
	JobID        string `json:"job_id"`
	Attempt      int    `json:"attempt"`
	FencingToken uint64 `json:"fencing_token"`
}

// FailJobs moves non-terminal jobs without a live attempt to failed with a
// reason (e.g. deadline). Others are ignored.
type FailJobs struct {
	JobIDs []string `json:"job_ids"`
	Reason string   `json:"reason"`
}

// SetReasons records why queued jobs cannot be placed (Job.Reason). Only
// queued jobs are touched.
type SetReasons struct {
	Reasons map[string]string `json:"reasons"` // job ID → reason
}

// SetQueue sets a queue's concurrency limit (0 = unlimited).
type SetQueue struct {
	Name       string `json:"name"`
	MaxRunning int    `json:"max_running"`
}

// GC drops terminal jobs (and their attempts) finished before Before, and
// idempotency keys recorded before KeysBefore. The leader computes both from
// its configured retention and idempotency window, so every node drops the
// same records.
type GC struct {
	Before     time.Time `json:"before"`
	KeysBefore time.Time `json:"keys_before"`
}

// Result is what Apply returns for one entry (raft.ApplyFuture.Response()).
type Result struct {
	Index uint64 `json:"index"`
	// Err is set when the whole command was refused; it wraps a sentinel.
	Err error `json:"-"`
	// Jobs has one entry per submitted job, in order.
	Jobs []SubmitResult `json:"jobs,omitempty"`
	// Skipped lists job IDs of placements (or other per-item changes) that
	// Apply refused, with the reason.
	Skipped map[string]string `json:"skipped,omitempty"`
	// Submits has one entry per member of a SubmitGroup, in order.
	Submits []MemberResult `json:"submits,omitempty"`
	// Workflow is the ID of the workflow a SubmitWorkflow created (or
	// found, for a repeated ID or idempotency key).
	Workflow string `json:"workflow,omitempty"`
}

// MemberResult is the outcome of one member of a SubmitGroup: the jobs it
// created or found (as SubmitJobs alone answers), or why it was refused.
type MemberResult struct {
	Jobs []SubmitResult `json:"jobs,omitempty"`
	// Refused is "<code>: <message>" when Apply refused the member (it
	// changed nothing); Err turns it back into an error. It is a string so
	// that it survives the JSON a follower receives when it forwards.
	Refused string `json:"refused,omitempty"`
}

// Err is nil for an applied member, else an error wrapping the sentinel
// (ErrBadCommand, ErrConflict, ErrNotFound, ErrStaleToken) that the member
// alone would have been refused with.
func (m MemberResult) Err() error {
	if m.Refused == "" {
		return nil
	}
	return batchItemErr(m.Refused)
}

// SubmitResult is the outcome of one job in SubmitJobs.
type SubmitResult struct {
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate,omitempty"` // an earlier job with the same idempotency key
}
