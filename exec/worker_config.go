package exec

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"runtime"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Assignment is one live attempt placed on a node, with its job's spec.
// The spec is needed (and may be left empty) only for attempts in state
// assigned: the worker reads it only to start one.
type Assignment struct {
	Attempt fsm.Attempt
	Spec    fsm.JobSpec
	// Inputs are the parents' results of a job with dependencies (read
	// only for attempts not yet started).
	Inputs []Input
	// Checkpoint is the job's checkpoint kept in raft (read only for
	// attempts not yet started; nil: none).
	Checkpoint []byte
	// CheckpointFrom is the node of the task's latest earlier attempt that
	// started ("" for none): when it is another node, its checkpoint
	// directory is fetched from there before this attempt starts.
	CheckpointFrom string
	// CheckpointStored is that attempt's checkpoint in the object store
	// (nil: none stored): read when CheckpointFrom cannot serve it.
	CheckpointStored *StoredCheckpoint
}

// Assignments is the worker's view of the replicated state (main adapts the
// local FSM). Watch returns a coalescing signal that fires after anything is
// applied, and a function to stop watching. LiveAttempts returns the live
// (assigned or running) attempts on node, read from the local FSM. Both are
// called from the worker's goroutine and must not block for long.
type Assignments interface {
	Watch() (<-chan struct{}, func())
	LiveAttempts(node string) ([]Assignment, error)
}

// Reporter sends an executor report to the leader (through raft). An error
// that wraps fsm.ErrStaleToken means the attempt was superseded: the worker
// stops retrying. Any other error is retried with backoff. Called from many
// goroutines at once.
type Reporter interface {
	Report(ctx context.Context, r fsm.ReportAttempt) error
}

// LeaderContact gates lease renewals and starts. InContactWithLeader: true
// on the leader, or on a follower that heard from the leader recently; called
// every renew interval per attempt, so it must be cheap. InSync: true once
// the local FSM has caught up with the leader since contact was last gained.
// A restarted or healed node replays stale assignments until then, and
// starting one could run a job the leader already placed elsewhere.
type LeaderContact interface {
	InContactWithLeader() bool
	InSync() bool
}

// WorkerDeps are the worker's collaborators.
type WorkerDeps struct {
	Assignments   Assignments
	Reporter      Reporter
	LeaderContact LeaderContact
	// Artifacts fetches parents' artifacts from other nodes for a child's
	// inputs (nil: a child whose parent ran elsewhere fails to start).
	Artifacts ArtifactFetcher
	// Checkpoints fetches a checkpoint directory from the node that ran a
	// task's previous attempt (nil: the next attempt starts with what
	// this node has).
	Checkpoints CheckpointFetcher
	// Outputs is the object store finished attempts' artifacts and logs
	// are uploaded to (outputs.go); nil: they stay on this node only.
	Outputs OutputStore
	Logger  *slog.Logger // nil = slog.Default()
}

// Defaults. The lease must stay below what the leader waits before it
// declares a silent node's attempts lost; see exec/DESIGN.md.
const (
	DefaultLeaseDuration = 6 * time.Second
	DefaultLogMaxBytes   = 10 << 20
	DefaultKeepFinished  = 24 * time.Hour
)

const maxDataDirLen = 56

// WorkerConfig configures the worker.
type WorkerConfig struct {
	// Node is this agent's name (fsm.Node.Name); FOREMAN_NODE in jobs.
	Node string
	// JobUsers lists the users (names or uids, the part of a job's
	// `user:` before any ":group") jobs may run as on this node; "*"
	// allows any. An attempt naming another user fails at once with
	// ErrUserNotAllowed. Nil allows any (the agent passes its
	// --job-users, default "nobody").
	JobUsers []string
	// HostVolumes are the node's --host-volume directories: an attempt may
	// use only these (fsm/volume.go), whatever its spec says.
	HostVolumes []fsm.HostVolume
	// DefaultJobUser is the user of jobs that name none; "" runs them as
	// the agent's own user.
	DefaultJobUser string
	// DataDir is the agent's data dir; attempts live in DataDir/attempts.
	DataDir string
	// SupervisorPath and SupervisorArgs start a supervisor:
	// SupervisorPath SupervisorArgs... --dir <attemptDir>. Empty path =
	// os.Executable(); main leaves the default ["supervise"].
	SupervisorPath string
	SupervisorArgs []string
	// SupervisorEnv is added to the agent's environment for supervisors;
	// main can use it to hand driver settings to the supervisor process.
	SupervisorEnv []string
	// DefaultDriver runs jobs whose spec names no driver.
	DefaultDriver string
	// LeaseDuration is how long a supervisor lets its job run without a
	// renewal; RenewInterval is how often the worker renews (default L/3).
	LeaseDuration time.Duration
	RenewInterval time.Duration
	// LogMaxBytes caps each of stdout.log and stderr.log; one rotated copy
	// of each is kept.
	LogMaxBytes int64
	// KeepFinished is how long the logs and result of a reported attempt
	// stay on disk (the job's workdir is removed as soon as it is reported).
	KeepFinished time.Duration
	// ReportBackoffMin/Max bound the retry delay of reports to the leader.
	ReportBackoffMin, ReportBackoffMax time.Duration
	// ImageCache is passed to drivers (container images by digest).
	ImageCache string
	// MaxConcurrentStarts bounds the supervisors starting at once (from
	// fork until the job started); further attempts wait in order. Default
	// 8×NumCPU: a start spends much of its wall time waiting (exec, page
	// faults, the run queue), so 2×NumCPU left the CPUs idle (1,000 no-op
	// jobs on 3 agents, 2 cores: 76–85/s at 4, 114/s at 16); unbounded, a
	// node handed thousands of attempts at once starved raft and lost the
	// leader (exec/DESIGN.md).
	MaxConcurrentStarts int
	// JobNice is the nice value process jobs run at, below the agent
	// (priority.go); 0 leaves them at the agent's. Supervisors keep the
	// agent's.
	JobNice int
	// JobsCgroup is the cpu cgroup that holds process jobs (in its
	// "process" child) and the container driver's job cgroups; empty
	// means "/foreman/<Node>", the container driver's default parent.
	// JobsCPUWeight is its weight against the agent's 100 (cpu.weight
	// scale; 0 = no cgroup, nice only). Needs root; without it a warning
	// is logged and only nice applies.
	JobsCgroup    string
	JobsCPUWeight int
	// WarmSupervisors is how many spare supervisors wait, already started,
	// for the next attempts (spare.go); 0 starts none ahead of time.
	WarmSupervisors int
	// MaxIdleSupervisors bounds the supervisors kept idle between attempts
	// for reuse (recycle.go): a supervisor whose attempt is over goes back
	// to the pool unless it holds this many; 0 = no reuse, every attempt
	// gets a process of its own. Must be 0 or >= WarmSupervisors.
	MaxIdleSupervisors int
	// SaturatedRunQueue is the host's runnable tasks per online CPU above
	// which a start with no idle supervisor waits for one of this node's
	// busy supervisors to come back instead of starting another process,
	// and no spare is started ahead (claim.go, hostload.go); 0 never
	// waits. Agents that share a host all see its run queue, where each
	// sees only its own slots.
	SaturatedRunQueue int
	// ArtifactsMaxBytes caps the artifacts kept of one attempt (files past
	// it, in path order, are deleted with a warning); ArtifactsNodeMaxBytes
	// caps those of all finished attempts on this node (the oldest are
	// evicted first; 0 = no node cap). Artifacts go with the attempt dir
	// after KeepFinished.
	ArtifactsMaxBytes     int64
	ArtifactsNodeMaxBytes int64
	// GPURoot is where the host's NVIDIA files are read ("" = "/"; a fake
	// root in tests, `foreman agent --gpu-root`): drivers isolate each
	// attempt's GPUs from what they find there (exec/gpu).
	GPURoot string
	// UploadConcurrency bounds the files this node uploads to the object
	// store at once; UploadRetryFor is how long a file is retried (with
	// backoff) after its attempt finished before it is reported not
	// stored (outputs.go).
	UploadConcurrency int
	UploadRetryFor    time.Duration
	// InputMaxBytes bounds one job input, InputFetchTimeout its fetch;
	// InputCacheMaxBytes the node's cache of inputs by checksum (the least
	// recently used are evicted first; inputs.go).
	InputMaxBytes      int64
	InputCacheMaxBytes int64
	InputFetchTimeout  time.Duration
	// NvidiaSMI is nvidia-smi's path for GPU metrics ("" searches PATH,
	// then /usr/local/nvidia/bin), as detection's --nvidia-smi.
	NvidiaSMI string
	// GPUMemoryOver is what the VRAM watchdog does about a share job that
	// stays over its share where dmem does not cap it (gpu_watchdog.go):
	// GPUMemoryReport (the default) or GPUMemoryKill. GPUMemoryWatchEvery
	// is how often it samples while share jobs run; GPUMemoryGrace how
	// long a job may stay over before it acts.
	GPUMemoryOver       string
	GPUMemoryWatchEvery time.Duration
	GPUMemoryGrace      time.Duration
}

// deviceCgroup is the cgroup path under which process jobs on an NVIDIA
// host get their device cgroups: the process jobs' leaf of JobsCgroup.
func (c *WorkerConfig) deviceCgroup() string {
	parent := c.JobsCgroup
	if parent == "" {
		parent = "/foreman/" + c.Node
	}
	return path.Join(parent, ProcessJobsLeaf)
}

// DefaultWorkerConfig returns the defaults; Node and DataDir must be set.
func DefaultWorkerConfig() WorkerConfig {
	return WorkerConfig{
		SupervisorArgs:   []string{"supervise"},
		DefaultDriver:    ProcessDriverName,
		LeaseDuration:    DefaultLeaseDuration,
		RenewInterval:    DefaultLeaseDuration / 3,
		LogMaxBytes:      DefaultLogMaxBytes,
		KeepFinished:     DefaultKeepFinished,
		ReportBackoffMin: 50 * time.Millisecond,
		ReportBackoffMax: 2 * time.Second,

		MaxConcurrentStarts: 8 * runtime.NumCPU(),
		JobNice:             10,
		JobsCPUWeight:       20,
		WarmSupervisors:     2,
		MaxIdleSupervisors:  8 * runtime.NumCPU(),
		SaturatedRunQueue:   DefaultSaturatedRunQueue,

		ArtifactsMaxBytes:     DefaultArtifactsMaxBytes,
		ArtifactsNodeMaxBytes: DefaultArtifactsNodeMaxBytes,
		UploadConcurrency:     DefaultUploadConcurrency,
		UploadRetryFor:        DefaultUploadRetryFor,
		InputMaxBytes:         DefaultInputMaxBytes,
		InputCacheMaxBytes:    DefaultInputCacheMaxBytes,
		InputFetchTimeout:     DefaultInputFetchTimeout,

		GPUMemoryOver:       GPUMemoryReport,
		GPUMemoryWatchEvery: DefaultGPUMemoryWatchEvery,
		GPUMemoryGrace:      DefaultGPUMemoryGrace,
	}
}

// Validate checks the config and says which field is wrong.
func (c *WorkerConfig) Validate() error {
	switch {
	case c.Node == "":
		return fmt.Errorf("%w: Node is empty", ErrInvalidConfig)
	case c.DataDir == "":
		return fmt.Errorf("%w: DataDir is empty", ErrInvalidConfig)
	case len(c.DataDir) > maxDataDirLen:
		// <data>/attempts/<26-char job ID>-<n>/lease.sock must fit a unix socket address (108 bytes).
		return fmt.Errorf("%w: DataDir %q is longer than %d bytes (unix socket paths are limited)", ErrInvalidConfig, c.DataDir, maxDataDirLen)
	case c.GPURoot != "" && !path.IsAbs(c.GPURoot):
		return fmt.Errorf("%w: GPURoot %q must be an absolute path", ErrInvalidConfig, c.GPURoot)
	case c.GPUMemoryOver != GPUMemoryReport && c.GPUMemoryOver != GPUMemoryKill:
		return fmt.Errorf("%w: GPUMemoryOver %q must be %q or %q", ErrInvalidConfig, c.GPUMemoryOver, GPUMemoryReport, GPUMemoryKill)
	case c.GPUMemoryWatchEvery <= 0 || c.GPUMemoryGrace < 0:
		return fmt.Errorf("%w: need GPUMemoryWatchEvery > 0 and GPUMemoryGrace >= 0", ErrInvalidConfig)
	case c.DefaultDriver == "":
		return fmt.Errorf("%w: DefaultDriver is empty", ErrInvalidConfig)
	case c.LeaseDuration <= 0:
		return fmt.Errorf("%w: LeaseDuration must be > 0", ErrInvalidConfig)
	case c.RenewInterval <= 0 || c.RenewInterval > c.LeaseDuration/2:
		return fmt.Errorf("%w: RenewInterval %v must be in (0, LeaseDuration/2 = %v]", ErrInvalidConfig, c.RenewInterval, c.LeaseDuration/2)
	case c.LogMaxBytes < 4096:
		return fmt.Errorf("%w: LogMaxBytes %d must be >= 4096", ErrInvalidConfig, c.LogMaxBytes)
	case c.KeepFinished < 0:
		return fmt.Errorf("%w: KeepFinished must be >= 0", ErrInvalidConfig)
	case c.ReportBackoffMin <= 0 || c.ReportBackoffMax < c.ReportBackoffMin:
		return fmt.Errorf("%w: need 0 < ReportBackoffMin <= ReportBackoffMax", ErrInvalidConfig)
	case c.JobNice < 0 || c.JobNice > 19:
		return fmt.Errorf("%w: JobNice %d must be in 0..19", ErrInvalidConfig, c.JobNice)
	case c.JobsCPUWeight < 0 || c.JobsCPUWeight > 10000:
		return fmt.Errorf("%w: JobsCPUWeight %d must be in 0..10000 (0: no cgroup)", ErrInvalidConfig, c.JobsCPUWeight)
	case c.MaxConcurrentStarts < 1:
		return fmt.Errorf("%w: MaxConcurrentStarts %d must be >= 1", ErrInvalidConfig, c.MaxConcurrentStarts)
	case c.ArtifactsMaxBytes < 0 || c.ArtifactsNodeMaxBytes < 0:
		return fmt.Errorf("%w: ArtifactsMaxBytes and ArtifactsNodeMaxBytes must be >= 0", ErrInvalidConfig)
	case c.WarmSupervisors < 0:
		return fmt.Errorf("%w: WarmSupervisors %d must be >= 0", ErrInvalidConfig, c.WarmSupervisors)
	case c.SaturatedRunQueue < 0:
		return fmt.Errorf("%w: SaturatedRunQueue %d must be >= 0 (0: never wait)", ErrInvalidConfig, c.SaturatedRunQueue)
	case c.MaxIdleSupervisors < 0 || (c.MaxIdleSupervisors > 0 && c.MaxIdleSupervisors < c.WarmSupervisors):
		return fmt.Errorf("%w: MaxIdleSupervisors %d must be 0 (no reuse) or >= WarmSupervisors (%d)", ErrInvalidConfig, c.MaxIdleSupervisors, c.WarmSupervisors)
	}
	return nil
}
