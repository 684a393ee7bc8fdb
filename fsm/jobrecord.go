package fsm

import (
	"bytes"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// Apply reads a stored job to change its state (place, report, release,
// cancel, GC...) but never changes its spec, which is most of the record:
// command, env, labels, image and so on. Decoding the spec and encoding it
// again on every transition was most of the CPU a job's attempt reports
// cost. So the applier reads a job as a storedJob, whose spec stays the
// encoded bytes it was stored as, decodes only the spec fields that
// Apply's decisions and indexes use (schedSpec), and writes the record back
// with the same spec bytes.
//
// That writes exactly the bytes a decode and re-encode of the whole job
// would (StateHash must not depend on the path), because a stored spec is
// this codec's deterministic output: decoding it and encoding it again is
// the identity. The one value that does not round-trip is CBOR null (a nil
// Command, or a zero run_at or deadline from a version 1 JSON entry: null
// decodes to nil, which omitempty then leaves out), so a spec with a null
// byte anywhere takes the full decode and re-encode (a false positive only
// costs time). TestStoredJobRoundTrip and TestGoldenStateHash hold this.

// storedJob is Job as stored, its spec left encoded. Its fields, names and
// tags must be Job's (TestStoredJobMirrorsJob checks).
type storedJob struct {
	ID              string          `json:"id"`
	Spec            cbor.RawMessage `json:"spec"`
	State           JobState        `json:"state"`
	Reason          string          `json:"reason,omitempty"`
	IdempotencyKey  string          `json:"idempotency_key,omitempty"`
	SubmittedAt     time.Time       `json:"submitted_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	FinishedAt      time.Time       `json:"finished_at,omitzero"`
	NextRunAt       time.Time       `json:"next_run_at,omitzero"`
	Attempts        int             `json:"attempts"`
	CountedAttempts int             `json:"counted_attempts"`
	Current         int             `json:"current_attempt,omitempty"`
	ExitCode        *int            `json:"exit_code,omitempty"`
	Workflow        string          `json:"workflow,omitempty"`
	Deps            *Deps           `json:"deps,omitempty"`
	Gang            *GangStatus     `json:"gang,omitempty"`
	Preemptions     int             `json:"preemptions,omitempty"`
	Array           *ArrayStatus    `json:"array,omitempty"`
	ArrayTask       *ArrayTask      `json:"array_task,omitempty"`
	SubmittedBy     string          `json:"submitted_by,omitempty"`
	CreateIndex     uint64          `json:"create_index"`
	ModifyIndex     uint64          `json:"modify_index"`
}

// schedSpec is JobSpec as Apply reads it: the placement group and
// priority (queued_by_group), the deadline (jobs_by_due), the retry
// policy (finishJob), the dependencies (dag.go) and the webhooks
// (delivery.go). The other fields are skipped without being decoded.
// Every JobSpec field is here with its tag (TestViewsMirrorRecords), so no
// key is unknown: an unknown key costs allocations and a duplicate check.
type schedSpec struct {
	Name             skipped       `json:"name,omitempty"`
	Namespace        string        `json:"namespace,omitempty"` // events and quotas
	Command          skipped       `json:"command"`
	Env              skipped       `json:"env,omitempty"`
	SecretEnv        skipped       `json:"secret_env,omitempty"`
	Resources        Resources     `json:"resources,omitempty"`
	Priority         int           `json:"priority"`
	MaxAttempts      int           `json:"max_attempts,omitempty"`
	Timeout          skipped       `json:"timeout,omitempty"`
	Labels           skipped       `json:"labels,omitempty"`
	Driver           string        `json:"driver,omitempty"`
	Image            skipped       `json:"image,omitempty"`
	Network          skipped       `json:"network,omitempty"`
	User             string        `json:"user,omitempty"` // placement group
	KillSignal       skipped       `json:"kill_signal,omitempty"`
	KillTimeout      skipped       `json:"kill_timeout,omitempty"`
	Queue            string        `json:"queue,omitempty"`
	Constraints      []string      `json:"constraints,omitempty"`
	Placement        skipped       `json:"placement,omitempty"`
	Backoff          Backoff       `json:"backoff,omitempty"`
	NoRetryExitCodes []int         `json:"no_retry_exit_codes,omitempty"`
	RunAt            skipped       `json:"run_at,omitempty"`
	Deadline         *time.Time    `json:"deadline,omitempty"`
	AllowUnplaceable skipped       `json:"allow_unplaceable,omitempty"`
	Schedule         skipped       `json:"schedule,omitempty"`
	ScheduledAt      skipped       `json:"scheduled_at,omitempty"`
	DependsOn        []string      `json:"depends_on,omitempty"`
	Condition        Condition     `json:"condition,omitempty"`
	After            []AfterDep    `json:"after,omitempty"`
	Singleton        skipped       `json:"singleton,omitempty"`
	Volumes          []VolumeMount `json:"volumes,omitempty"` // placement group
	Array            *ArraySpec    `json:"array,omitempty"`
	HTTP             skipped       `json:"http,omitempty"`
	Notify           []Webhook     `json:"notify,omitempty"`
	Inputs           skipped       `json:"inputs,omitempty"`
	Gang             *GangSpec     `json:"gang,omitempty"`
	Preemptible      *bool         `json:"preemptible,omitempty"`
	OnGPUError       string        `json:"on_gpu_error,omitempty"`
}

// skipped is a field a view type does not read: the decoder checks the
// value is well-formed (as for the whole record) and moves on.
type skipped struct{}

func (*skipped) UnmarshalCBOR([]byte) error { return nil }

// jobView is Job with only its Spec (as S), Current (as C) and Gang (as
// G) read: a field whose type is skipped is passed over by the decoder.
type jobView[S, C, G any] struct {
	ID              skipped `json:"id"`
	Spec            S       `json:"spec"`
	State           skipped `json:"state"`
	Reason          skipped `json:"reason,omitempty"`
	IdempotencyKey  skipped `json:"idempotency_key,omitempty"`
	SubmittedAt     skipped `json:"submitted_at"`
	UpdatedAt       skipped `json:"updated_at"`
	FinishedAt      skipped `json:"finished_at,omitzero"`
	NextRunAt       skipped `json:"next_run_at,omitzero"`
	Attempts        skipped `json:"attempts"`
	CountedAttempts skipped `json:"counted_attempts"`
	Current         C       `json:"current_attempt,omitempty"`
	ExitCode        skipped `json:"exit_code,omitempty"`
	Workflow        skipped `json:"workflow,omitempty"`
	Deps            skipped `json:"deps,omitempty"`
	Gang            G       `json:"gang,omitempty"`
	Preemptions     skipped `json:"preemptions,omitempty"`
	Array           skipped `json:"array,omitempty"`
	ArrayTask       skipped `json:"array_task,omitempty"`
	SubmittedBy     skipped `json:"submitted_by,omitempty"`
	CreateIndex     skipped `json:"create_index"`
	ModifyIndex     skipped `json:"modify_index"`
}

// jobCurrentView is Job with only Current and Gang read (a "running"
// report needs nothing else).
type jobCurrentView = jobView[skipped, int, *GangStatus]

// jobSpecView is Job with only Spec read (Tx.JobSpec).
type jobSpecView = jobView[JobSpec, skipped, skipped]

// countSpec is JobSpec with only what the metrics count by: the
// namespace and the queue (Tx.CountActive).
type countSpec struct {
	Name             skipped `json:"name,omitempty"`
	Namespace        string  `json:"namespace,omitempty"`
	Command          skipped `json:"command"`
	Env              skipped `json:"env,omitempty"`
	SecretEnv        skipped `json:"secret_env,omitempty"`
	Resources        skipped `json:"resources,omitempty"`
	Priority         skipped `json:"priority"`
	MaxAttempts      skipped `json:"max_attempts,omitempty"`
	Timeout          skipped `json:"timeout,omitempty"`
	Labels           skipped `json:"labels,omitempty"`
	Driver           skipped `json:"driver,omitempty"`
	Image            skipped `json:"image,omitempty"`
	Network          skipped `json:"network,omitempty"`
	User             skipped `json:"user,omitempty"`
	KillSignal       skipped `json:"kill_signal,omitempty"`
	KillTimeout      skipped `json:"kill_timeout,omitempty"`
	Queue            string  `json:"queue,omitempty"`
	Constraints      skipped `json:"constraints,omitempty"`
	Placement        skipped `json:"placement,omitempty"`
	Backoff          skipped `json:"backoff,omitempty"`
	NoRetryExitCodes skipped `json:"no_retry_exit_codes,omitempty"`
	RunAt            skipped `json:"run_at,omitempty"`
	Deadline         skipped `json:"deadline,omitempty"`
	AllowUnplaceable skipped `json:"allow_unplaceable,omitempty"`
	Schedule         skipped `json:"schedule,omitempty"`
	ScheduledAt      skipped `json:"scheduled_at,omitempty"`
	DependsOn        skipped `json:"depends_on,omitempty"`
	Condition        skipped `json:"condition,omitempty"`
	After            skipped `json:"after,omitempty"`
	Singleton        skipped `json:"singleton,omitempty"`
	Volumes          skipped `json:"volumes,omitempty"`
	Array            skipped `json:"array,omitempty"`
	HTTP             skipped `json:"http,omitempty"`
	Notify           skipped `json:"notify,omitempty"`
	Inputs           skipped `json:"inputs,omitempty"`
	Gang             skipped `json:"gang,omitempty"`
	Preemptible      skipped `json:"preemptible,omitempty"`
	OnGPUError       skipped `json:"on_gpu_error,omitempty"`
}

// jobCountView is Job with only countSpec read.
type jobCountView = jobView[countSpec, skipped, skipped]

// cborNull is the one byte whose value does not survive a round trip.
const cborNull = 0xf6

// decodeStoredJob reads a job record for Apply. The returned job's Spec
// holds only schedSpec's fields when raw is non-nil: raw is then the
// stored spec, for encodeJob. raw is nil when the spec was decoded whole.
func decodeStoredJob(v []byte) (j *Job, raw []byte, err error) {
	var s storedJob
	if err := decodeStoredJobRecord(v, &s); err != nil {
		return nil, nil, err
	}
	j = &Job{
		ID: s.ID, State: s.State, Reason: s.Reason, IdempotencyKey: s.IdempotencyKey,
		SubmittedAt: s.SubmittedAt, UpdatedAt: s.UpdatedAt, FinishedAt: s.FinishedAt, NextRunAt: s.NextRunAt,
		Attempts: s.Attempts, CountedAttempts: s.CountedAttempts, Current: s.Current, ExitCode: s.ExitCode,
		Workflow: s.Workflow, Deps: s.Deps, Gang: s.Gang, Preemptions: s.Preemptions,
		Array: s.Array, ArrayTask: s.ArrayTask, SubmittedBy: s.SubmittedBy,
		CreateIndex: s.CreateIndex, ModifyIndex: s.ModifyIndex,
	}
	if bytes.IndexByte(s.Spec, cborNull) >= 0 {
		if err := decode(s.Spec, &j.Spec); err != nil {
			return nil, nil, err
		}
		return j, nil, nil
	}
	var ss schedSpec
	if err := decodeSchedSpec(s.Spec, &ss); err != nil {
		return nil, nil, err
	}
	j.Spec = JobSpec{
		Resources: ss.Resources, Priority: ss.Priority, MaxAttempts: ss.MaxAttempts, Driver: ss.Driver,
		Queue: ss.Queue, Constraints: ss.Constraints, Backoff: ss.Backoff, NoRetryExitCodes: ss.NoRetryExitCodes,
		Deadline: ss.Deadline, DependsOn: ss.DependsOn, Condition: ss.Condition, After: ss.After, Notify: ss.Notify,
		Namespace: ss.Namespace, User: ss.User, Volumes: ss.Volumes, Array: ss.Array,
		Gang: ss.Gang, Preemptible: ss.Preemptible, OnGPUError: ss.OnGPUError,
	}
	return j, s.Spec, nil
}

// encodeJob encodes j; with raw (from decodeStoredJob) as its spec, else
// whole.
func encodeJob(j *Job, raw []byte) ([]byte, error) {
	if raw == nil {
		return encode(j)
	}
	return encodeStoredJob(&storedJob{
		ID: j.ID, Spec: raw, State: j.State, Reason: j.Reason, IdempotencyKey: j.IdempotencyKey,
		SubmittedAt: j.SubmittedAt, UpdatedAt: j.UpdatedAt, FinishedAt: j.FinishedAt, NextRunAt: j.NextRunAt,
		Attempts: j.Attempts, CountedAttempts: j.CountedAttempts, Current: j.Current, ExitCode: j.ExitCode,
		Workflow: j.Workflow, Deps: j.Deps, Gang: j.Gang, Preemptions: j.Preemptions,
		Array: j.Array, ArrayTask: j.ArrayTask, SubmittedBy: j.SubmittedBy,
		CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex,
	})
}
