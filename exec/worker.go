package exec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/fsm"
)

// Worker runs the attempts the leader assigns to this node: it starts one
// detached supervisor per attempt, renews their leases while this node is in
// contact with the leader, forwards cancels, and reports results.
type Worker struct {
	cfg            WorkerConfig
	deps           WorkerDeps
	log            *slog.Logger
	attemptsDir    string
	processJobsDir string // the cgroup dir process jobs start in (priority.go)

	mu   sync.Mutex
	runs map[string]*attemptRun // by TaskID
	// orphans are live attempts in state running that have no directory
	// here (data dir lost); reported failed once per Worker.
	orphans map[string]bool
	ctx     context.Context
	wg      sync.WaitGroup

	starts *startQueue
	// recheck asks Run to reconcile again: a queued start found the node
	// out of sync and gave its attempt back.
	recheck chan struct{}
	// pool holds idle standby supervisors (spare.go). sparesUsed counts
	// handoffs, recycled the attempts after which a supervisor said idle,
	// spawned the supervisor processes started.
	pool       *supervisorPool
	sparesUsed atomic.Int64
	recycled   atomic.Int64
	spawned    atomic.Int64
	// busy counts the claims on supervisors (claim.go): starts under way
	// and attempts being served, which a start on a saturated host may
	// wait for; waitedStarts the starts that waited so; spawnSlots the
	// supervisor processes starting.
	busy         atomic.Int64
	waitedStarts atomic.Int64
	spawnSlots   chan struct{}
	saturated    func() bool

	// reachable: the attempt dirs' ancestors were found searchable by
	// others once (handOver); they are not looked at again.
	reachable atomic.Bool

	// uploadSlots bounds the node's uploads in flight (outputs.go).
	uploadSlots chan struct{}

	// ended is closed (and replaced) each time an attempt here finishes:
	// it wakes the log follows (logs.go) as soon as the output is whole.
	endedMu sync.Mutex
	ended   chan struct{}

	// assignErr is the last error reading assignments (reconcile's
	// goroutine only), said again only when it changes or after a while.
	assignErr   string
	assignErrAt time.Time
}

// attemptEnded returns a channel closed when the next attempt on this
// node finishes.
func (w *Worker) attemptEnded() <-chan struct{} {
	w.endedMu.Lock()
	defer w.endedMu.Unlock()
	if w.ended == nil {
		w.ended = make(chan struct{})
	}
	return w.ended
}

func (w *Worker) signalEnded() {
	w.endedMu.Lock()
	defer w.endedMu.Unlock()
	if w.ended != nil {
		close(w.ended)
		w.ended = nil
	}
}

// NewWorker checks cfg and returns a worker; call Run to start it.
func NewWorker(cfg WorkerConfig, deps WorkerDeps) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Assignments == nil || deps.Reporter == nil || deps.LeaderContact == nil {
		return nil, fmt.Errorf("%w: WorkerDeps needs Assignments, Reporter and LeaderContact", ErrInvalidConfig)
	}
	if cfg.SupervisorPath == "" {
		p, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%w: SupervisorPath empty and os.Executable failed: %v", ErrInvalidConfig, err)
		}
		cfg.SupervisorPath = p
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "exec")
	warnIfJobUserCannotReach(&cfg, log)
	warnIfGPUsUnconfined(&cfg, log)
	return &Worker{
		cfg: cfg, deps: deps,
		log:            log,
		processJobsDir: jobsCgroupDir(&cfg, log),
		attemptsDir:    filepath.Join(cfg.DataDir, "attempts"),
		runs:           map[string]*attemptRun{},
		orphans:        map[string]bool{},
		starts:         newStartQueue(cfg.MaxConcurrentStarts),
		recheck:        make(chan struct{}, 1),
		pool:           newSupervisorPool(max(cfg.WarmSupervisors, cfg.MaxIdleSupervisors)),
		spawnSlots:     make(chan struct{}, runtime.NumCPU()),
		saturated:      hostSaturation(cfg.SaturatedRunQueue, hostCPUs()),
		uploadSlots:    make(chan struct{}, max(cfg.UploadConcurrency, 1)),
	}, nil
}

// AttemptDir is where attempt (job, n) lives on this node.
func (w *Worker) AttemptDir(jobID string, attempt int) string {
	return filepath.Join(w.attemptsDir, TaskID(jobID, attempt))
}

// Run re-adopts supervisors left by a previous agent, then follows the
// assignments until ctx ends. Supervisors keep running after Run returns:
// their leases expire unless a new worker re-adopts them in time.
func (w *Worker) Run(ctx context.Context) error {
	if err := os.MkdirAll(w.attemptsDir, 0o700); err != nil {
		return fmt.Errorf("attempts dir: %w", err)
	}
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	defer usage().watch(w.cfg.Node, w.jobsCgroup())() // metrics.go
	if m, err := gpu.ReadMajors(w.gpuRoot()); err == nil && m.Present() {
		defer gpuUsage().watch(w.cfg.Node, gpu.Config{Root: w.cfg.GPURoot, NvidiaSMI: w.cfg.NvidiaSMI})() // gpu_metrics.go
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.watchGPUMemory(ctx) // gpu_watchdog.go
		}()
	}
	w.adopt(ctx)
	w.resumeUploads(ctx)
	w.sweepCheckpoints()
	if w.pool.max > 0 {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.keepSpares(ctx)
		}()
	}

	changed, stop := w.deps.Assignments.Watch()
	defer stop()
	gcEvery := max(w.cfg.KeepFinished/4, time.Minute)
	gc := time.NewTicker(gcEvery)
	defer gc.Stop()
	for {
		var again <-chan time.Time
		t0 := time.Now()
		if w.reconcile(ctx) {
			// Something waits for sync, which no FSM change may signal.
			again = time.After(syncRecheck)
		}
		if !w.pace(ctx, time.Since(t0)) {
			w.wg.Wait()
			return nil
		}
		select {
		case <-ctx.Done():
			w.wg.Wait()
			return nil
		case <-changed:
		case <-w.recheck:
		case <-again:
		case <-gc.C:
			w.collectGarbage()
		}
	}
}

// syncRecheck is how soon a reconcile that deferred work runs again.
const syncRecheck = 20 * time.Millisecond

// Reconcile pacing. A reconcile reads every live attempt of this node from
// the local FSM (with the job of each attempt not yet started), and the
// watch fires after every applied entry: a node holding thousands of
// queued attempts spent a fifth of its CPU re-reading them, once per report
// batch. After a reconcile that took d the next waits reconcilePace×d
// (at most maxReconcilePause), so reconciles take at most about
// 1/(1+reconcilePace) of a core; an idle node (d ≈ 50 µs) is not slowed.
const (
	reconcilePace     = 3
	maxReconcilePause = 20 * time.Millisecond
)

// pace sleeps after a reconcile that took d; false if ctx ended meanwhile.
func (w *Worker) pace(ctx context.Context, d time.Duration) bool {
	pause := min(reconcilePace*d, maxReconcilePause)
	if pause < 100*time.Microsecond {
		return ctx.Err() == nil
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// reconcile compares the live attempts of this node with the supervisors.
// It starts nothing while the local FSM may be stale (not InSync) and then
// says it deferred work.
func (w *Worker) reconcile(ctx context.Context) (deferred bool) {
	live, err := w.deps.Assignments.LiveAttempts(w.cfg.Node)
	if err != nil {
		// Retried every few ms while it lasts (a client with no server
		// yet): said when it changes, and again every half minute.
		if msg := err.Error(); msg != w.assignErr || time.Since(w.assignErrAt) >= 30*time.Second {
			w.log.Warn("read assignments", "err", err)
			w.assignErr, w.assignErrAt = msg, time.Now()
		}
		return true
	}
	w.assignErr = ""
	contact := w.deps.LeaderContact.InContactWithLeader()
	synced := contact && w.deps.LeaderContact.InSync()
	seen := make(map[string]bool, len(live))
	for _, a := range live {
		id := TaskID(a.Attempt.JobID, a.Attempt.Num)
		seen[id] = true
		w.mu.Lock()
		r := w.runs[id]
		w.mu.Unlock()
		if r != nil {
			if r.token != a.Attempt.FencingToken {
				// An earlier attempt with this number, dropped by a
				// restore: stop it; the live one starts once it is gone.
				r.vanished(true)
				deferred = true
				continue
			}
			r.update(a)
			continue
		}
		if !synced {
			deferred = true
			continue
		}
		if w.ensure(ctx, id, a) {
			deferred = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, r := range w.runs {
		if !seen[id] {
			// An adopted attempt that was never seen live may just be ahead
			// of a lagging local FSM; trust its absence only in contact.
			r.vanished(contact)
		}
	}
	return deferred
}

// ensure handles a live attempt that has no run in this worker. It says
// whether to look again soon although the state may not change meanwhile.
func (w *Worker) ensure(ctx context.Context, id string, a Assignment) (again bool) {
	dir := filepath.Join(w.attemptsDir, id)
	own, ds := w.ownDir(ctx, id, dir, a)
	if !own {
		return true
	}
	switch {
	case ds.reported:
		// Reported; the local FSM has not caught up yet (or, past
		// reportedLag, ownDir checks that the dir is this attempt's).
		return true
	case ds.task:
		// A directory without a run: finished-but-unreported, or a
		// supervisor we lost track of. Either way adoption sorts it out.
		w.adoptDir(ctx, id, dir)
	case a.Attempt.State == fsm.AttemptAssigned:
		w.launch(ctx, id, dir, a)
	default:
		w.mu.Lock()
		done := w.orphans[id]
		w.orphans[id] = true
		w.mu.Unlock()
		if !done {
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				w.reportOrphan(ctx, a)
			}()
		}
	}
	return false
}

// ownDir makes sure dir, if it exists, belongs to the live attempt a. A
// dir left by an earlier attempt with the same number and another token
// (one a snapshot restore dropped) is adopted when its supervisor may still
// run (the next reconcile stops it as superseded) and removed once it has
// ended, so a can start. False: not yet. A dir reported less than
// reportedLag ago is taken as a's own (the local FSM has not applied the
// report yet) without reading its task file: that is the common case.
// It also says what it found in the dir, which ensure decides on: the
// markers are looked up once per attempt, not twice.
func (w *Worker) ownDir(ctx context.Context, id, dir string, a Assignment) (bool, dirState) {
	st, err := os.Stat(filepath.Join(dir, ReportedName))
	ds := dirState{reported: err == nil}
	if ds.reported && time.Since(st.ModTime()) < reportedLag {
		return true, ds
	}
	ds.task = exists(filepath.Join(dir, TaskFileName))
	if !ds.reported && !ds.task {
		return true, ds
	}
	tf, err := ReadTaskFile(dir)
	if err != nil || tf.Attempt.FencingToken == a.Attempt.FencingToken {
		return true, ds
	}
	if !ds.reported && !exists(filepath.Join(dir, ResultFileName)) {
		w.adoptDir(ctx, id, dir)
		return false, ds
	}
	w.log.Info("removing the directory of a superseded attempt", "task", id,
		"token", tf.Attempt.FencingToken, "live_token", a.Attempt.FencingToken)
	if err := os.RemoveAll(dir); err != nil {
		w.log.Warn("remove superseded attempt dir", "dir", dir, "err", err)
		return false, ds
	}
	return true, dirState{}
}

// dirState is what ownDir found in an attempt dir: the reported marker and
// the task file.
type dirState struct{ reported, task bool }

// reportedLag is how long a reported attempt may stay live in the local
// FSM before its directory is checked for a superseded attempt.
const reportedLag = time.Second

// reportOrphan fails an attempt that is running on this node according to
// the leader but left no trace here (the data dir was wiped or replaced).
func (w *Worker) reportOrphan(ctx context.Context, a Assignment) {
	w.log.Warn("running attempt has no directory on this node; reporting it failed",
		"job", a.Attempt.JobID, "attempt", a.Attempt.Num)
	w.report(ctx, fsm.ReportAttempt{
		JobID: a.Attempt.JobID, Attempt: a.Attempt.Num, FencingToken: a.Attempt.FencingToken,
		Node: w.cfg.Node, State: fsm.AttemptFailed, Reason: "attempt state lost on node",
		FinishedAt: time.Now().UTC(),
	})
}

func (w *Worker) register(r *attemptRun) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.runs[r.id]; ok {
		return false
	}
	w.runs[r.id] = r
	return true
}

func (w *Worker) unregister(r *attemptRun) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runs[r.id] == r {
		delete(w.runs, r.id)
	}
}

// report sends rep until it is acknowledged, superseded, or ctx ends.
func (w *Worker) report(ctx context.Context, rep fsm.ReportAttempt) error {
	delay := w.cfg.ReportBackoffMin
	for {
		err := w.deps.Reporter.Report(ctx, rep)
		if err == nil {
			return nil
		}
		if errors.Is(err, fsm.ErrStaleToken) || errors.Is(err, fsm.ErrNotFound) {
			w.log.Info("report superseded", "job", rep.JobID, "attempt", rep.Attempt, "state", rep.State, "err", err)
			return err
		}
		if ctx.Err() != nil {
			// Abandoned, not failed: a quick job's final report replaces its
			// running report, or the worker is stopping.
			return ctx.Err()
		}
		w.log.Warn("report failed; retrying", "job", rep.JobID, "attempt", rep.Attempt,
			"state", rep.State, "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, w.cfg.ReportBackoffMax)
	}
}

// Running returns the TaskIDs of the attempts this worker is handling.
func (w *Worker) Running() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.runs))
	for id := range w.runs {
		out = append(out, id)
	}
	return out
}
