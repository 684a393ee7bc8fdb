package exec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Files in an attempt directory (<data-dir>/attempts/<job>-<n>/).
const (
	TaskFileName   = "task.json"      // written by the agent before the supervisor starts
	ResultFileName = "result.json"    // written atomically by the supervisor at the end
	PIDFileName    = "supervisor.pid" // the supervisor's pid
	JobPIDFileName = "job.pid"        // process group of a process-driver job (crash cleanup)
	LeaseSockName  = "lease.sock"     // lease + control socket served by the supervisor
	StdoutName     = "stdout.log"     // plus stdout.log.1 after rotation
	StderrName     = "stderr.log"     // plus stderr.log.1 after rotation
	SupervisorLog  = "supervisor.log" // the supervisor's own stderr
	ReportedName   = "reported"       // marker: the final result was acknowledged (or superseded)
	WorkDirName    = "task"           // the job's working directory (/task in containers)
)

// TaskFileVersion is the task.json format this binary writes.
const TaskFileVersion = 1

// TaskID is the per-attempt name used for directories, containers and cgroups.
func TaskID(jobID string, attempt int) string { return fmt.Sprintf("%s-%d", jobID, attempt) }

// TaskFile is task.json: everything the supervisor needs, so that it never
// has to talk to the agent to do its job.
type TaskFile struct {
	Version int         `json:"version"`
	Node    string      `json:"node"`
	Attempt fsm.Attempt `json:"attempt"`
	Spec    fsm.JobSpec `json:"spec"`
	Driver  string      `json:"driver"`
	Env     []string    `json:"env"`
	// Lease is how long the supervisor lets the job run without a renewal.
	Lease fsm.Duration `json:"lease"`
	// LogMaxBytes caps each of stdout.log and stderr.log (one rotated copy is kept).
	LogMaxBytes   int64     `json:"log_max_bytes"`
	ImageCache    string    `json:"image_cache,omitempty"`
	ArtifactsDir  string    `json:"artifacts_dir,omitempty"`
	CheckpointDir string    `json:"checkpoint_dir,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	// ArtifactsMaxBytes caps what is kept of the artifacts (0: the default).
	ArtifactsMaxBytes int64 `json:"artifacts_max_bytes,omitempty"`
	// GPURoot and DeviceCgroup: Task's fields of the same names.
	GPURoot      string `json:"gpu_root,omitempty"`
	DeviceCgroup string `json:"device_cgroup,omitempty"`
	// Volumes are the spec's host volumes as this node resolved them
	// (volumes.go).
	Volumes []TaskVolume `json:"volumes,omitempty"`
}

// Result is result.json: how the attempt ended, as the supervisor saw it.
type Result struct {
	State       fsm.AttemptState `json:"state"`
	Reason      string           `json:"reason,omitempty"`
	ExitCode    *int             `json:"exit_code,omitempty"`
	Signal      string           `json:"signal,omitempty"`
	OOM         bool             `json:"oom,omitempty"`
	StartedAt   time.Time        `json:"started_at,omitzero"`
	FinishedAt  time.Time        `json:"finished_at"`
	PeakMemoryB int64            `json:"peak_memory_bytes,omitempty"`
	CPUTimeNs   int64            `json:"cpu_time_ns,omitempty"`
	StderrTail  string           `json:"stderr_tail,omitempty"`
	// JobResult is what the job wrote to its result file (result.go).
	JobResult          []byte `json:"job_result,omitempty"`
	JobResultTruncated bool   `json:"job_result_truncated,omitempty"`
	// Artifacts lists the files kept in the artifacts directory;
	// ArtifactsWarning says what was removed (artifacts.go).
	Artifacts        []fsm.Artifact `json:"artifacts,omitempty"`
	ArtifactsWarning string         `json:"artifacts_warning,omitempty"`
}

// Report turns a result into the executor's report for attempt tf.
func (r *Result) Report(tf *TaskFile) fsm.ReportAttempt {
	return fsm.ReportAttempt{
		JobID:        tf.Attempt.JobID,
		Attempt:      tf.Attempt.Num,
		FencingToken: tf.Attempt.FencingToken,
		Node:         tf.Node,
		State:        r.State,
		Reason:       r.Reason,
		StartedAt:    r.StartedAt,
		FinishedAt:   r.FinishedAt,
		ExitCode:     r.ExitCode,
		Signal:       r.Signal,
		OOM:          r.OOM,
		PeakMemoryB:  r.PeakMemoryB,
		CPUTimeNs:    r.CPUTimeNs,
		StderrTail:   r.StderrTail,

		Result:          r.JobResult,
		ResultTruncated: r.JobResultTruncated,

		Artifacts:        r.Artifacts,
		ArtifactsWarning: r.ArtifactsWarning,
	}
}

// writeJSONAtomic replaces path with v's JSON so readers never see half a
// file. Compact, not indented: two files per attempt on the start path
// (indenting was a tenth of the agent's CPU per no-op attempt). Not synced:
// a process that dies leaves the page cache intact, and what a power loss
// costs is in exec/DESIGN.md ("result.json is not synced").
func writeJSONAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// Not os.Rename: it first Lstats path to refuse a directory, one
	// syscall more on every attempt's task.json and result.json.
	if err := syscall.Rename(tmp, path); err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// ReadTaskFile reads dir/task.json.
func ReadTaskFile(dir string) (*TaskFile, error) {
	var tf TaskFile
	if err := readJSON(filepath.Join(dir, TaskFileName), &tf); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadTaskFile, err)
	}
	if tf.Version < 1 || tf.Version > TaskFileVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadTaskFile, tf.Version)
	}
	return &tf, nil
}

// ReadResult reads dir/result.json; os.ErrNotExist when the attempt has not finished.
func ReadResult(dir string) (*Result, error) {
	var r Result
	if err := readJSON(filepath.Join(dir, ResultFileName), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
