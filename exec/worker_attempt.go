package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// reasonSuperseded is recorded (never reported) when the attempt was
// replaced while its supervisor still ran.
const reasonSuperseded = "superseded"

// attemptRun is the worker's side of one supervisor.
type attemptRun struct {
	w   *Worker
	id  string
	dir string
	tf  *TaskFile

	// token is the fencing token of the attempt this run executes. A live
	// attempt with the same number but another token (the state was
	// restored from a snapshot) supersedes it.
	token uint64

	mu        sync.Mutex
	lease     *leaseClient // while follow runs: RenewLeases renews through it
	seenLive  bool
	cancelReq string // CancelRequested from the live set
	// localStop is a kill this node decided (the VRAM watchdog), sent
	// like a cancel with its reason.
	localStop string
	// share is the attempt's VRAM share (nil: none), for the watchdog.
	share  *fsm.Attempt
	gone   bool // no longer live: kill, do not report
	notify chan struct{}
	// startedHook, if set, runs once the supervisor said started or went
	// away (it frees the start slot).
	startedHook func()
	trace       startTrace
}

// startTrace times one attempt's start on this node, logged at debug level
// once the running report is acknowledged (docs/operations.md, "Where
// submit → start goes"). assigned is the leader's stamp of the placement;
// it is compared with this node's clock, so that one figure means something
// only when both run on one host (or with synchronised clocks).
type startTrace struct {
	assigned, seen, dequeued, forked, connected, jobStarted, event time.Time
}

func (r *attemptRun) logTrace(acked time.Time) {
	t := &r.trace
	if t.seen.IsZero() || t.event.IsZero() {
		return // adopted, not started here
	}
	ms := func(a, b time.Time) float64 {
		if a.IsZero() || b.IsZero() {
			return -1
		}
		return float64(b.Sub(a).Microseconds()) / 1000
	}
	r.w.log.Debug("attempt start trace", "task", r.id,
		"assigned_to_seen_ms", ms(t.assigned, t.seen), "queued_ms", ms(t.seen, t.dequeued),
		"prepare_fork_ms", ms(t.dequeued, t.forked), "connect_ms", ms(t.forked, t.connected),
		"supervisor_to_job_started_ms", ms(t.forked, t.jobStarted), "started_event_ms", ms(t.jobStarted, t.event),
		"running_report_ms", ms(t.event, acked), "seen_to_running_acked_ms", ms(t.seen, acked))
}

func newRun(w *Worker, id, dir string) *attemptRun {
	return &attemptRun{w: w, id: id, dir: dir, notify: make(chan struct{}, 1)}
}

func (r *attemptRun) poke() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// update records the attempt's replicated state.
func (r *attemptRun) update(a Assignment) {
	r.mu.Lock()
	r.seenLive = true
	changed := a.Attempt.CancelRequested != r.cancelReq
	r.cancelReq = a.Attempt.CancelRequested
	r.mu.Unlock()
	if changed {
		r.poke()
	}
}

// vanished is called when the attempt is not in the live set.
func (r *attemptRun) vanished(inContact bool) {
	r.mu.Lock()
	if r.gone || (!r.seenLive && !inContact) {
		r.mu.Unlock()
		return
	}
	r.gone = true
	r.mu.Unlock()
	r.poke()
}

// watchShare hands a share attempt to the VRAM watchdog (gpu_watchdog.go).
func (r *attemptRun) watchShare(a *fsm.Attempt) {
	if a.GPUShare == nil {
		return
	}
	c := *a
	r.mu.Lock()
	r.share = &c
	r.mu.Unlock()
}

// stopLocally kills the attempt with reason unless something else already
// stops it.
func (r *attemptRun) stopLocally(reason string) {
	r.mu.Lock()
	r.localStop = reason
	r.mu.Unlock()
	r.poke()
}

func (r *attemptRun) isGone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone
}

// launch queues the start of a supervisor for a new attempt. The start
// runs when a slot of the start queue is free, and only if the attempt is
// still live and this node is (still) in contact and in sync with the
// leader: a start delayed past a lost contact could outlive the leader's
// wait before it reschedules the job elsewhere (invariant 2).
func (w *Worker) launch(ctx context.Context, id, dir string, a Assignment) {
	r := newRun(w, id, dir)
	r.token = a.Attempt.FencingToken
	r.seenLive = true
	r.cancelReq = a.Attempt.CancelRequested
	r.trace.assigned, r.trace.seen = a.Attempt.AssignedAt, time.Now()
	if !w.register(r) {
		return
	}
	w.wg.Add(1)
	w.starts.submit(func(release func()) {
		r.trace.dequeued = time.Now()
		defer w.wg.Done()
		defer w.unregister(r)
		defer release()
		if ctx.Err() != nil || r.isGone() {
			return // nothing started: nothing to kill or report
		}
		// The supervisor first (claim.go): it may wait, and the contact
		// check must come right before the start.
		claim, ok := w.claimSupervisor(ctx)
		if !ok {
			return
		}
		lc := w.deps.LeaderContact
		if r.isGone() || !lc.InContactWithLeader() || !lc.InSync() {
			w.release(claim)
			if r.isGone() {
				return
			}
			// Give it back; reconcile launches it again once in sync.
			w.unregister(r)
			select {
			case w.recheck <- struct{}{}:
			default:
			}
			return
		}
		hold := time.AfterFunc(startSlotHold, release)
		defer hold.Stop()
		lc2, err := r.start(ctx, a, claim)
		if errors.Is(err, errSupervisorExited) {
			release()
			r.finish(ctx, r.collect())
			return
		}
		if err != nil {
			release()
			reason := "start supervisor: " + err.Error()
			if errors.Is(err, ErrUserNotAllowed) {
				reason = err.Error()
			} else {
				w.log.Error("cannot start supervisor", "task", id, "err", err)
			}
			res := &Result{State: fsm.AttemptFailed, Reason: reason, FinishedAt: time.Now().UTC()}
			writeJSONAtomic(filepath.Join(dir, ResultFileName), res)
			r.finish(ctx, res)
			return
		}
		r.startedHook = release
		r.follow(ctx, lc2)
	})
}

// startSlotHold bounds how long one start holds its slot: a driver that is
// slow to start (an image pull) must not stall the node's other starts.
const startSlotHold = 2 * time.Second

// adoptDir takes over an attempt dir left by an earlier worker.
func (w *Worker) adoptDir(ctx context.Context, id, dir string) (live bool) {
	tf, err := ReadTaskFile(dir)
	if err != nil {
		// No supervisor is ever started before task.json exists.
		w.log.Warn("removing attempt dir without task file", "dir", dir, "err", err)
		os.RemoveAll(dir)
		return false
	}
	r := newRun(w, id, dir)
	r.tf, r.token = tf, tf.Attempt.FencingToken
	r.watchShare(&tf.Attempt)
	if !w.register(r) {
		return true
	}
	var lc *leaseClient
	if !exists(filepath.Join(dir, ResultFileName)) {
		lc, _ = dialLease(sockPath(dir))
	}
	w.log.Info("adopting attempt", "task", id, "supervisor", lc != nil)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.unregister(r)
		if lc == nil {
			r.finish(ctx, r.collect())
			return
		}
		r.follow(ctx, lc)
	}()
	return lc != nil
}

// start writes task.json, pre-listens on lease.sock, and starts the
// detached supervisor. Because the socket exists before the supervisor
// runs, the worker can connect at once.
func (r *attemptRun) start(ctx context.Context, a Assignment, claim supervisorClaim) (*leaseClient, error) {
	w := r.w
	claimed := true
	defer func() {
		if claimed {
			w.release(claim) // failed before any supervisor was asked
		}
	}()
	driver := a.Spec.Driver
	if driver == "" {
		driver = w.cfg.DefaultDriver
	}
	if a.Spec.User == "" && driver == ProcessDriverName && w.cfg.DefaultJobUser != "" {
		a.Spec.User = w.cfg.DefaultJobUser // a copy: the replicated spec is not edited
	}
	r.watchShare(&a.Attempt)
	// Set first: a failed start is reported from it.
	r.tf = &TaskFile{
		Version: TaskFileVersion, Node: w.cfg.Node, Attempt: a.Attempt, Spec: a.Spec,
		Driver: driver, Env: jobEnv(a, w.cfg.Node),
		Lease: fsm.Duration(w.cfg.LeaseDuration), LogMaxBytes: w.cfg.LogMaxBytes,
		ImageCache: w.cfg.ImageCache, CreatedAt: time.Now().UTC(),
		ArtifactsDir: artifactsDir(r.dir), ArtifactsMaxBytes: w.cfg.ArtifactsMaxBytes,
		GPURoot: w.cfg.GPURoot, DeviceCgroup: w.cfg.deviceCgroup(),
	}
	// Two mkdirs, not MkdirAll + chmod: this is on every attempt's path.
	// The dir may exist (a start that failed before task.json was written);
	// any other failure shows in the second mkdir.
	if err := os.Mkdir(r.dir, 0o700); errors.Is(err, os.ErrNotExist) {
		os.MkdirAll(w.attemptsDir, 0o700)
		os.Mkdir(r.dir, 0o700)
	}
	if err := os.Mkdir(filepath.Join(r.dir, WorkDirName), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := w.checkUser(a.Spec.User, driver); err != nil {
		return nil, err
	}
	vols, err := resolveVolumes(w.cfg.Node, w.cfg.HostVolumes, a.Spec.Volumes)
	if err != nil {
		return nil, err
	}
	r.tf.Volumes = vols
	r.tf.Env = append(r.tf.Env, volumeEnv(vols, driver)...)
	if driver == ProcessDriverName && a.Spec.User != "" {
		if err := w.handOver(r.dir, a.Spec.User); err != nil {
			return nil, err
		}
	}
	ioEnv, err := prepareIO(r.dir, driver, a.Inputs)
	if err != nil {
		return nil, fmt.Errorf("result file and inputs: %w", err)
	}
	r.tf.Env = append(r.tf.Env, ioEnv...)
	if err := w.fetchInputArtifacts(ctx, r.dir, a.Inputs); err != nil {
		return nil, fmt.Errorf("inputs: %w", err)
	}
	if err := w.fetchInputs(ctx, r.dir, a.Spec.Inputs); err != nil {
		return nil, err
	}
	if driver != HTTPDriverName {
		ckDir, ckEnv, err := w.prepareCheckpoint(ctx, a, driver)
		if err != nil {
			return nil, fmt.Errorf("checkpoint directory: %w", err)
		}
		r.tf.CheckpointDir = ckDir
		r.tf.Env = append(r.tf.Env, ckEnv...)
	}
	if err := writeJSONAtomic(filepath.Join(r.dir, TaskFileName), r.tf); err != nil {
		return nil, fmt.Errorf("write task file: %w", err)
	}
	lnFile, err := listenUnixFile(sockPath(r.dir))
	if err != nil {
		return nil, fmt.Errorf("lease socket: %w", err)
	}
	defer lnFile.Close()
	claimed = false // startSupervisor spends it
	attemptOver, err := w.startSupervisor(r.dir, lnFile, claim)
	if err != nil {
		return nil, err
	}
	r.trace.forked = time.Now()
	afterSupervisorStart(r.dir)
	lc, err := dialLease(sockPath(r.dir))
	r.trace.connected = time.Now()
	if err != nil {
		// The supervisor closes and removes its socket only after it has
		// written result.json, so a short job can be over before we dial.
		// Wait for the attempt to be over (without renewals it ends by its
		// lease at the latest) and let the caller collect the real result.
		<-attemptOver
		return nil, fmt.Errorf("%w: %v", errSupervisorExited, err)
	}
	return lc, nil
}

// afterSupervisorStart lets tests widen the window between starting a
// supervisor and connecting to it.
var afterSupervisorStart = func(dir string) {}

// errSupervisorExited means the supervisor ran but was gone before the
// worker could connect; its result.json is the attempt's outcome.
var errSupervisorExited = errors.New("supervisor exited before the lease connection")

var reservedEnv = map[string]bool{
	"FOREMAN_JOB_ID": true, "FOREMAN_ATTEMPT": true, "FOREMAN_FENCING_TOKEN": true, "FOREMAN_NODE": true,
	"FOREMAN_RESULT": true, "FOREMAN_INPUTS": true, "FOREMAN_ARTIFACTS": true, "FOREMAN_CHECKPOINT": true,
	"GANG_ID": true, "GANG_SIZE": true, "GANG_INDEX": true, "GANG_PEERS": true, "GANG_PORT": true,
	EnvGPUMemory: true,
}

// EnvGPUMemory is a share job's VRAM share in MiB (issue 24): what it may
// use of its one device (e.g. for PyTorch's
// torch.cuda.set_per_process_memory_fraction, or vLLM's
// --gpu-memory-utilization).
const EnvGPUMemory = "FOREMAN_GPU_MEMORY_MIB"

// jobEnv is the spec's env (sorted for stable output) plus the FOREMAN_*
// variables, which the job cannot override.
func jobEnv(a Assignment, node string) []string {
	vars := a.Spec.Env
	if len(a.Spec.SecretEnv) > 0 {
		vars = make(map[string]string, len(a.Spec.Env)+len(a.Spec.SecretEnv))
		maps.Copy(vars, a.Spec.Env)
		maps.Copy(vars, a.Spec.SecretEnv)
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys)+5)
	hasPath := false
	for _, k := range keys {
		if reservedEnv[k] {
			continue // getenv takes the first match, so a job could spoof these
		}
		env = append(env, k+"="+vars[k])
		hasPath = hasPath || k == "PATH"
	}
	if !hasPath {
		env = append(env, "PATH="+defaultPath)
	}
	env = append(env,
		"FOREMAN_JOB_ID="+a.Attempt.JobID,
		"FOREMAN_ATTEMPT="+strconv.Itoa(a.Attempt.Num),
		"FOREMAN_FENCING_TOKEN="+strconv.FormatUint(a.Attempt.FencingToken, 10),
		"FOREMAN_NODE="+node,
	)
	if s := a.Attempt.GPUShare; s != nil {
		env = append(env, EnvGPUMemory+"="+strconv.FormatInt(s.MemoryMiB, 10))
	}
	if t := a.Attempt.Task; t != nil {
		// A gang task (fsm/gang.go): every task of one placement shares
		// the fencing token; GANG_PEERS lists every task's host:port in
		// task order, its own at GANG_INDEX.
		env = append(env,
			"GANG_ID="+a.Attempt.JobID,
			"GANG_SIZE="+strconv.Itoa(t.Size),
			"GANG_INDEX="+strconv.Itoa(t.Index),
			"GANG_PORT="+strconv.Itoa(t.Port),
			"GANG_PEERS="+strings.Join(t.Peers, ","),
		)
	}
	return env
}

// follow renews the lease and relays state until the supervisor goes away.
func (r *attemptRun) follow(ctx context.Context, lc *leaseClient) {
	w := r.w
	ticker := time.NewTicker(w.cfg.RenewInterval)
	defer ticker.Stop()
	runCtx, stopRunning := context.WithCancel(ctx)
	var reporting sync.WaitGroup
	defer func() { stopRunning(); reporting.Wait() }()
	sentCancel := ""
	// A renewal skipped for want of leader contact is retried every
	// renewRetry until contact is back, not at the next tick: skipping a
	// whole tick (an adopting agent not yet in contact, an election during a
	// rolling restart) costs up to RenewInterval of the lease each time.
	var retry <-chan time.Time
	renew := func() {
		retry = nil
		if !r.renew(lc) {
			retry = time.After(renewRetry)
		}
	}
	r.setLease(lc)
	defer r.setLease(nil)
	renew()
	r.poke() // deliver a cancel that was requested before we connected
	for {
		select {
		case ev, ok := <-lc.events:
			if r.startedHook != nil {
				r.startedHook()
				r.startedHook = nil
			}
			if !ok {
				lc.close()
				stopRunning()
				reporting.Wait()
				r.finish(ctx, r.collect())
				return
			}
			if t, found := strings.CutPrefix(ev, msgStarted+" "); found && !r.isGone() && r.tf.Attempt.State == fsm.AttemptAssigned {
				startedAt, _ := time.Parse(time.RFC3339Nano, t)
				r.trace.jobStarted, r.trace.event = startedAt, time.Now()
				if !r.trace.dequeued.IsZero() && startedAt.After(r.trace.dequeued) {
					startSeconds().WithLabelValues(r.tf.Driver).Observe(startedAt.Sub(r.trace.dequeued).Seconds())
				}
				reporting.Add(1)
				go func() {
					defer reporting.Done()
					r.reportRunning(runCtx, lc, startedAt)
				}()
			}
		case <-ticker.C:
			renew()
		case <-retry:
			renew()
		case <-r.notify:
			r.mu.Lock()
			want := r.cancelReq
			if want == "" {
				want = r.localStop
			}
			if r.gone {
				want = reasonSuperseded
			}
			r.mu.Unlock()
			if want != "" && want != sentCancel && sentCancel != reasonSuperseded {
				if err := lc.cancel(want); err == nil {
					sentCancel = want
					w.log.Info("cancel sent", "task", r.id, "reason", want)
				}
			}
		case <-ctx.Done():
			// The agent stops (a restart, an upgrade). It renewed every
			// lease before leaving the cluster (RenewLeases): renewing here
			// would be too late, out of contact.
			lc.close()
			return
		}
	}
}

func (r *attemptRun) setLease(lc *leaseClient) {
	r.mu.Lock()
	r.lease = lc
	r.mu.Unlock()
}

// RenewLeases renews the lease of every attempt this worker follows, now,
// if this node is in contact with the leader, and returns how many it
// renewed. The agent calls it just before it leaves the cluster for a
// restart: the renewal interval's worth of lease already used is given
// back, so the next agent has the whole lease to adopt the attempts in.
func (w *Worker) RenewLeases() int {
	if !w.deps.LeaderContact.InContactWithLeader() {
		return 0
	}
	w.mu.Lock()
	runs := make([]*attemptRun, 0, len(w.runs))
	for _, r := range w.runs {
		runs = append(runs, r)
	}
	w.mu.Unlock()
	n := 0
	for _, r := range runs {
		r.mu.Lock()
		lc := r.lease
		r.mu.Unlock()
		if lc != nil && lc.renew() == nil {
			n++
		}
	}
	return n
}

// renewRetry is how soon a renewal skipped for want of leader contact is
// tried again.
const renewRetry = 100 * time.Millisecond

// renew renews the lease if this node is in contact with the leader (the
// fence: a node cut off from the leader lets its leases run out) and says
// whether it did.
func (r *attemptRun) renew(lc *leaseClient) bool {
	if !r.w.deps.LeaderContact.InContactWithLeader() {
		return false
	}
	return lc.renew() == nil
}

func (r *attemptRun) reportRunning(ctx context.Context, lc *leaseClient, startedAt time.Time) {
	rep := fsm.ReportAttempt{
		JobID: r.tf.Attempt.JobID, Attempt: r.tf.Attempt.Num, FencingToken: r.tf.Attempt.FencingToken,
		Node: r.tf.Node, State: fsm.AttemptRunning, StartedAt: startedAt.UTC(),
	}
	err := r.w.report(ctx, rep)
	if err == nil {
		r.logTrace(time.Now())
	}
	if errors.Is(err, fsm.ErrStaleToken) || errors.Is(err, fsm.ErrNotFound) {
		// Superseded while starting: make sure it dies and is not reported.
		r.mu.Lock()
		r.gone = true
		r.mu.Unlock()
		r.poke()
	}
}

// collect returns the attempt's result, or makes one when the supervisor
// vanished without writing it (it crashed or was killed).
func (r *attemptRun) collect() *Result {
	if res, err := ReadResult(r.dir); err == nil {
		return res
	}
	killJobGroup(r.dir, r.tf)
	res := &Result{State: fsm.AttemptFailed, Reason: "supervisor exited without a result", FinishedAt: time.Now().UTC()}
	writeJSONAtomic(filepath.Join(r.dir, ResultFileName), res)
	return res
}

// finish reports the final result (unless superseded) and marks it done.
func (r *attemptRun) finish(ctx context.Context, res *Result) {
	w := r.w
	// result.json is written (after all the output): log follows can end.
	w.signalEnded()
	superseded := r.isGone()
	collected := time.Now()
	upload := false
	if !superseded {
		rep := res.Report(r.tf)
		if rep.Outputs = w.pendingOutputs(); rep.Outputs != nil {
			// Before the report: a restarted agent resumes the upload.
			os.WriteFile(filepath.Join(r.dir, UploadName), nil, 0o644)
		}
		err := w.report(ctx, rep)
		if err != nil && ctx.Err() != nil {
			return // shutting down: the next worker reports it
		}
		upload = err == nil && rep.Outputs != nil
		// exit_to_collected: the supervisor drains output, writes
		// result.json, exits; the worker sees its connection close.
		w.log.Debug("attempt finish trace", "task", r.id,
			"exit_to_collected_ms", float64(collected.Sub(res.FinishedAt).Microseconds())/1000,
			"final_report_ms", float64(time.Since(collected).Microseconds())/1000)
	}
	os.WriteFile(filepath.Join(r.dir, ReportedName), nil, 0o644)
	os.RemoveAll(filepath.Join(r.dir, WorkDirName))
	if upload {
		w.startUpload(ctx, r.dir, r.tf, res)
	} else {
		os.Remove(filepath.Join(r.dir, UploadName)) // superseded: nothing to resume
	}
	if len(res.Artifacts) > 0 {
		w.enforceNodeCap()
	}
	w.log.Info("attempt done", "task", r.id, "state", res.State, "reason", res.Reason, "superseded", superseded)
}

// killJobGroup kills a process-driver job whose supervisor died, but only
// if the group leader is still that job (pids are reused, e.g. after a
// reboot): its environment must carry this attempt's fencing token.
func killJobGroup(dir string, tf *TaskFile) {
	b, err := os.ReadFile(filepath.Join(dir, JobPIDFileName))
	if err != nil {
		return
	}
	pgid, err := strconv.Atoi(string(b))
	if err != nil || pgid <= 1 {
		return
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pgid))
	if err != nil {
		return
	}
	want := "FOREMAN_FENCING_TOKEN=" + strconv.FormatUint(tf.Attempt.FencingToken, 10) + "\x00"
	if bytes.Contains(env, []byte(want)) {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// listenUnixFile creates a listening unix socket and returns it as a file
// to hand to the supervisor. The socket file stays after we close ours.
func listenUnixFile(path string) (*os.File, error) {
	syscall.Unlink(path) // a socket left by an earlier start (os.Remove would also try rmdir)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	return ln.File()
}

func sockPath(dir string) string { return filepath.Join(dir, LeaseSockName) }
