package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// JobSpecInput is the job spec as a client writes it. It differs from
// fsm.JobSpec where the wire is friendlier than the record: command may be
// a string, cpu and memory may carry units, priority and max_attempts can
// be told apart from "missing", and times and durations are parsed here so
// errors name the field. Normalize turns it into an fsm.JobSpec with every
// default filled in, so Apply never guesses.
type JobSpecInput struct {
	Name string `json:"name,omitempty"`
	// Namespace the job belongs to ("" = ?namespace=, else "default").
	Namespace   string            `json:"namespace,omitempty"`
	Command     json.RawMessage   `json:"command"` // ["argv", ...] or "shell string"
	Env         map[string]string `json:"env,omitempty"`
	SecretEnv   map[string]string `json:"secret_env,omitempty"` // like env; values never returned
	Resources   *ResourcesInput   `json:"resources,omitempty"`
	Priority    *int              `json:"priority,omitempty"`
	MaxAttempts *int              `json:"max_attempts,omitempty"`
	Timeout     json.RawMessage   `json:"timeout,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`

	Driver      string          `json:"driver,omitempty"`
	Image       string          `json:"image,omitempty"`
	Network     string          `json:"network,omitempty"`
	User        string          `json:"user,omitempty"`
	KillSignal  string          `json:"kill_signal,omitempty"`
	KillTimeout json.RawMessage `json:"kill_timeout,omitempty"`

	Queue            string          `json:"queue,omitempty"`
	Constraints      []string        `json:"constraints,omitempty"`
	Placement        string          `json:"placement,omitempty"`
	Backoff          *BackoffInput   `json:"backoff,omitempty"`
	NoRetryExitCodes []int           `json:"no_retry_exit_codes,omitempty"`
	RunAt            json.RawMessage `json:"run_at,omitempty"`
	Deadline         json.RawMessage `json:"deadline,omitempty"`
	AllowUnplaceable bool            `json:"allow_unplaceable,omitempty"`

	// DependsOn lists the parents: job IDs in POST /v1/jobs, job names
	// of the same workflow in POST /v1/workflows. Condition is success
	// (the default), failure, always or one_success.
	DependsOn []string `json:"depends_on,omitempty"`
	Condition string   `json:"condition,omitempty"`
	// After lists parents each with its own requirement (POST /v1/jobs
	// only; instead of depends_on and condition): "ID[:ok|any|failed|
	// cancelled]" or {"job": ID, "on": ...}, the form a job's spec is
	// returned in.
	After []AfterInput `json:"after,omitempty"`
	// Singleton: run after the singleton job of the same name submitted
	// before it in the namespace has ended (one at a time, in submit
	// order; POST /v1/jobs only, needs a name).
	Singleton bool `json:"singleton,omitempty"`
	// Volumes are host volumes the job mounts, by the name an agent
	// declares them under (fsm/volume.go).
	Volumes []VolumeInput `json:"volumes,omitempty"`
	// Array makes the job an array of tasks (fsm/array.go):
	// "START-END[:STEP][%PARALLEL]" or {"start", "end", "step",
	// "parallel"}, the form a job's spec is returned in.
	Array *ArrayInput `json:"array,omitempty"`

	// HTTP makes the job an HTTP request (driver "http"); Notify lists
	// webhooks (notify.go).
	HTTP   *HTTPRequestInput `json:"http,omitempty"`
	Notify []WebhookInput    `json:"notify,omitempty"`

	// Inputs are fetched into the job's working directory before it
	// starts (issue 25; fsm.InputSource).
	Inputs []InputSourceInput `json:"inputs,omitempty"`

	// Gang makes the job N tasks placed together (issue 18); Preemptible
	// overrides the default (true below priority 50).
	Gang        *GangInput `json:"gang,omitempty"`
	Preemptible *bool      `json:"preemptible,omitempty"`
	// OnGPUError is keep (default) or requeue: what a live attempt does
	// when a GPU it holds turns unhealthy (fsm.GPUErrorKeep).
	OnGPUError string `json:"on_gpu_error,omitempty"`

	// IdempotencyKey deduplicates submissions (inside the raft apply): a
	// second submit with the same key returns the first job's ID.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// rawEntry is an entry of a list that takes a string or an object (after,
// volumes) as the client wrote it: Normalize reads it, so an error names
// its position (after[2]).
type rawEntry struct{ raw json.RawMessage }

func (e *rawEntry) UnmarshalJSON(b []byte) error {
	e.raw = append(json.RawMessage(nil), b...)
	return nil
}

func (e rawEntry) MarshalJSON() ([]byte, error) {
	if e.raw == nil {
		return []byte("null"), nil
	}
	return e.raw, nil
}

func stringEntry(s string) rawEntry {
	b, _ := json.Marshal(s)
	return rawEntry{raw: b}
}

// decode reads the entry as a string (ok) or into obj, whose unknown
// fields are refused; usage is the error for anything else.
func (e rawEntry) decode(obj any, usage string) (s string, isString bool, err error) {
	if json.Unmarshal(e.raw, &s) == nil {
		return s, true, nil
	}
	dec := json.NewDecoder(bytes.NewReader(e.raw))
	dec.DisallowUnknownFields()
	if bytes.Equal(bytes.TrimSpace(e.raw), []byte("null")) || dec.Decode(obj) != nil {
		return "", false, errors.New(usage)
	}
	return "", false, nil
}

// AfterInput is one entry of after: "ID[:ON]" (ON ok when left out) or
// {"job": ID, "on": ON}.
type AfterInput struct{ rawEntry }

// After is the entry "ID[:ON]", for Go callers.
func After(s string) AfterInput { return AfterInput{stringEntry(s)} }

// parse reads the entry.
func (a AfterInput) parse() (fsm.AfterDep, error) {
	var d struct {
		Job string  `json:"job"`
		On  *string `json:"on"`
	}
	s, isString, err := a.decode(&d, `must be "ID[:ok|any|failed|cancelled]" or {"job": ID, "on": "ok|any|failed|cancelled"}`)
	switch {
	case err != nil:
		return fsm.AfterDep{}, err
	case isString:
		return fsm.ParseAfter(s)
	}
	on := string(fsm.AfterOK)
	if d.On != nil {
		on = *d.On
	}
	return fsm.ParseAfter(d.Job + ":" + on)
}

// VolumeInput is one entry of volumes: "NAME:DEST[:ro|:rw]" or {"name":
// NAME, "dest": DEST, "read_only": BOOL}.
type VolumeInput struct{ rawEntry }

// Volume is the entry "NAME:DEST[:ro]", for Go callers.
func Volume(s string) VolumeInput { return VolumeInput{stringEntry(s)} }

// parse reads the entry (fsm.CheckVolumeMounts checks the whole list).
func (v VolumeInput) parse() (fsm.VolumeMount, error) {
	var m fsm.VolumeMount
	s, isString, err := v.decode(&m, `must be "NAME:DEST[:ro]" or {"name": NAME, "dest": DEST, "read_only": true|false}`)
	if err != nil || !isString {
		return m, err
	}
	name, rest, ok := strings.Cut(s, ":")
	if !ok {
		return m, fmt.Errorf("%q: want NAME:DEST[:ro] (NAME a volume an agent declares with --host-volume)", s)
	}
	m.Name = name
	if m.Dest, m.ReadOnly, err = fsm.CutVolumeMode(rest); err != nil {
		return m, fmt.Errorf("%q: %v", s, err)
	}
	return m, nil
}

// ArrayInput is the array field: "START-END[:STEP][%PARALLEL]" or
// {"start": N, "end": N, "step": N, "parallel": N}.
type ArrayInput struct{ rawEntry }

// Array is the entry "START-END[:STEP][%PARALLEL]", for Go callers.
func Array(s string) *ArrayInput { return &ArrayInput{stringEntry(s)} }

// parse reads the field.
func (v ArrayInput) parse() (fsm.ArraySpec, error) {
	var a fsm.ArraySpec
	s, isString, err := v.decode(&a, `must be "START-END[:STEP][%PARALLEL]" or {"start": N, "end": N, "step": N, "parallel": N}`)
	switch {
	case err != nil:
		return a, err
	case isString:
		return fsm.ParseArray(s)
	}
	return a, a.Check()
}

// GangInput asks for Size tasks placed all-or-nothing, on distinct nodes
// unless spread is false.
type GangInput struct {
	Size   int   `json:"size"`
	Spread *bool `json:"spread,omitempty"`
}

// ResourcesInput is a resource request. cpu is millicores as a number, or
// a string with units ("500m", "0.5"); memory is MiB as a number, or a
// string with units ("256MiB", "1GiB").
type ResourcesInput struct {
	CPU    json.RawMessage  `json:"cpu,omitempty"`
	Memory json.RawMessage  `json:"memory,omitempty"`
	Named  map[string]int64 `json:"named,omitempty"`
	// GPUs is named.gpu by its own name (issue 24): whole devices, which
	// the leader picks on the node.
	GPUs *int64 `json:"gpus,omitempty"`
	// GPUMemory asks for a share of one GPU's memory (issue 24), MiB as a
	// number or a string with units ("20GiB"); with gpus it must be 1.
	GPUMemory json.RawMessage `json:"gpu_memory,omitempty"`
}

// BackoffInput is the retry delay policy; durations are strings ("5s") or
// numbers of seconds.
type BackoffInput struct {
	Initial    json.RawMessage `json:"initial,omitempty"`
	Multiplier *float64        `json:"multiplier,omitempty"`
	Max        json.RawMessage `json:"max,omitempty"`
	Jitter     *float64        `json:"jitter,omitempty"`
}

// Defaults filled in by Normalize.
const (
	DefaultPriority    = 50
	DefaultMaxAttempts = 3
	DefaultKillSignal  = "SIGTERM"
	DefaultKillTimeout = 10 * time.Second
	DefaultNetwork     = "none"
	DefaultPlacement   = "binpack"
)

// DefaultBackoff is used when a spec gives no backoff (or leaves parts of
// it zero): 1s, 2s, 4s ... capped at 5m, ±20%.
var DefaultBackoff = fsm.Backoff{
	Initial:    fsm.Duration(time.Second),
	Multiplier: 2,
	Max:        fsm.Duration(5 * time.Minute),
	Jitter:     0.2,
}

// SubmitResponse is the reply to a single-job POST /v1/jobs.
type SubmitResponse = api.SubmitResponse

// BatchSubmitResponse is the reply to a batch POST /v1/jobs.
type BatchSubmitResponse struct {
	Jobs []SubmitResponse `json:"jobs"`
}

// BatchSubmitRequest is the body of a batch POST /v1/jobs.
type BatchSubmitRequest struct {
	Jobs []JobSpecInput `json:"jobs"`
}

// Argv builds the command field from an argv array.
func Argv(argv ...string) json.RawMessage {
	b, _ := json.Marshal(argv) // []string always marshals
	return b
}

// JSONString builds a raw field from a string: a shell command, a quantity
// such as "500m", a duration such as "10m" or an RFC 3339 time.
func JSONString(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// InputSourceInput is one input of a job spec: source (http(s):// or
// s3://bucket/key), dest (relative to the job's directory) and checksum
// (sha256:HEX).
type InputSourceInput struct {
	Source   string `json:"source"`
	Dest     string `json:"dest,omitempty"`
	Checksum string `json:"checksum,omitempty"`
}

// normalizeInputs checks a spec's inputs, naming the bad field.
func normalizeInputs(in []InputSourceInput) ([]fsm.InputSource, error) {
	if len(in) > fsm.MaxInputs {
		return nil, invalid("inputs", "at most %d inputs (got %d)", fsm.MaxInputs, len(in))
	}
	var out []fsm.InputSource
	dests := map[string]int{}
	for i, x := range in {
		src := fsm.InputSource{Source: x.Source, Dest: x.Dest, Checksum: strings.ToLower(x.Checksum)}
		if field, err := fsm.ValidateInput(src); err != nil {
			return nil, invalid(fmt.Sprintf("inputs[%d].%s", i, field), "%v", err)
		}
		d := fsm.InputDest(src)
		if j, dup := dests[d]; dup {
			return nil, invalid(fmt.Sprintf("inputs[%d].dest", i), "%q is also inputs[%d]'s destination", d, j)
		}
		dests[d] = i
		out = append(out, src)
	}
	return out, nil
}
