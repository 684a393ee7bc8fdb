package exec

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Driver starts one attempt's workload. Drivers run inside the per-attempt
// supervisor process (never in the agent), so a driver may block, and its
// children outlive the agent.
type Driver interface {
	// Name is the value users put in JobSpec.Driver ("container", "process").
	Name() string
	// Available returns nil when this host can run the driver, or an error
	// that says what is missing (not root, no cgroups, not Linux).
	Available() error
	// Start launches the task and returns once it is running (or failed to
	// start: the error then says why in words a user understands, such as
	// `command "foo" not found in rootfs` or `image "x": not found`).
	Start(ctx context.Context, t *Task) (Handle, error)
}

// Task is everything a driver needs to start one attempt.
type Task struct {
	// ID is unique per attempt and safe as a file or cgroup name: "<job>-<attempt>".
	ID   string
	Spec fsm.JobSpec
	// Env is the full environment for the job (spec env + FOREMAN_* variables).
	Env []string
	// Dir is the attempt's private directory on the host (owned by the supervisor).
	Dir string
	// WorkDir is the host directory mounted at /task (the job's working directory).
	WorkDir string
	// ResultFile is the host file mounted at /foreman/result and InputsDir
	// the host directory mounted (read-only) at /foreman/inputs (result.go).
	ResultFile, InputsDir string
	// ArtifactsDir and CheckpointDir are host directories mounted at
	// /foreman/artifacts and /foreman/checkpoint (may be empty = not mounted).
	ArtifactsDir  string
	CheckpointDir string
	// Stdout and Stderr receive the job's output. They are the write ends of
	// pipes the supervisor drains into size-capped, rotated log files. The
	// supervisor closes its copies as soon as Start returns, so a driver must
	// hand them to the workload during Start and not keep them.
	Stdout, Stderr *os.File
	// ImageCache is the host directory where pulled images are kept by digest.
	ImageCache string
	// GPUs are the devices the leader picked for this attempt
	// (fsm.Attempt.GPUs); a driver gives the job exactly these, and on a
	// host with NVIDIA devices denies it every other (process_gpu.go).
	GPUs []fsm.GPU
	// GPUShare is the attempt's VRAM share, whose device is also in GPUs
	// (nil: none); where the kernel has the dmem controller the driver caps
	// the job's device memory at it (gpu/dmem.go).
	GPUShare *fsm.GPUShare
	// GPURoot is the directory under which the host's NVIDIA files
	// (/proc/devices, /proc/driver/nvidia, /dev/nvidia*, the ldcache and the
	// driver's libraries) are read: "" or "/" in production, a fake root in
	// tests.
	GPURoot string
	// DeviceCgroup is the cgroup path under which a process job on an
	// NVIDIA host gets its device cgroup <DeviceCgroup>/<ID> ("": none).
	DeviceCgroup string
	// Volumes are the host directories the job mounts (container: bind
	// mounts at Dest; process: named in FOREMAN_VOLUME_<NAME>).
	Volumes []TaskVolume
}

// Handle controls a started task.
type Handle interface {
	// Wait blocks until the task has exited and returns how it ended.
	Wait() ExitStatus
	// Signal delivers sig to the task (its whole process group / container).
	Signal(sig syscall.Signal) error
	// Destroy kills anything left and releases cgroups, mounts and state.
	// It is idempotent and must be called once Wait has returned.
	Destroy() error
}

// ExitStatus is how a task ended.
type ExitStatus struct {
	ExitCode    int    // -1 when killed by a signal
	Signal      string // e.g. "SIGKILL", "" when it exited
	OOM         bool   // from the cgroup's OOM-kill counter, not the exit code
	PeakMemoryB int64
	CPUTimeNs   int64
	StartedAt   time.Time
	FinishedAt  time.Time
	Err         error // set when the driver lost track of the task
}

// Warmer is implemented by drivers whose first use opens process-wide handles
// (descriptors a library keeps for the life of the process) or fills
// process-wide caches. A standby supervisor calls Warm before it records
// the clean state every later attempt is compared with (recycle.go), so
// those handles are part of that baseline instead of a leak that would stop
// the supervisor from being recycled, and the first attempt does not pay
// for them. Warm must not start processes or leave goroutines running; an
// error only means the handles may open later (and the check then notices).
type Warmer interface {
	Warm() error
}

// OrphanCleaner is implemented by drivers that leave host state behind when
// a supervisor dies without Destroy (containers, cgroups, mounts). The worker
// calls it once at start, after re-adopting live supervisors; live holds the
// Task.IDs whose supervisors are still running. It must not touch those.
type OrphanCleaner interface {
	CleanupOrphans(live map[string]bool) error
}
