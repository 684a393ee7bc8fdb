package exec

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/fsm"
	"golang.org/x/sys/unix"
)

// Defaults for the kill sequence when the spec leaves them empty.
const (
	DefaultKillSignal  = "SIGTERM"
	DefaultKillTimeout = 10 * time.Second
)

// drainTimeout bounds how long the supervisor keeps reading output after the
// job exited: a daemonised grandchild that escaped the process group may hold
// the pipe open forever.
const drainTimeout = 2 * time.Second

// listenerFD is where the agent passes the already-listening lease socket
// (ExtraFiles[0]), so it can connect before the supervisor even runs.
const listenerFD = 3

// supervisor runs one attempt: it starts the task, enforces timeout and
// lease, serves lease.sock, and writes result.json.
type supervisor struct {
	dir   string
	tf    *TaskFile
	log   *slog.Logger
	clock Clock
	lease *Lease
	lnFD  int // the pre-listened lease socket the agent passed
	// dirty: something of the attempt may outlive it (its process group
	// did not disappear); the process must not serve another attempt.
	dirty bool

	cancelCh chan string
}

// SuperviseMain is `foreman supervise --dir <attemptDir>` (args exclude the
// subcommand), or `foreman supervise --standby`: a spare that waits on fd 3
// for the worker to hand it an attempt (spare.go). It returns the process
// exit code: 0 whenever result.json was written, whatever the job did, and
// for a spare the worker let go.
func SuperviseMain(args []string) int {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	dir := fs.String("dir", "", "the attempt directory holding task.json")
	standby := fs.Bool("standby", false, "wait on fd 3 for the worker to hand over attempts, one at a time")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// Terminal and session signals are not for us: only the lease, the
	// timeout and the agent's cancel end a job. Caught, not ignored: an
	// ignored disposition would be inherited by the job across exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGINT)
	if err := startJobLauncher(); err != nil {
		fmt.Fprintln(os.Stderr, "supervisor: jobs may not start below the agent:", err)
	}
	if *standby {
		return standbyMain()
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: foreman supervise --dir <attempt-dir> | --standby")
		return 2
	}
	code, _ := superviseDir(*dir, listenerFD)
	return code
}

// superviseDir runs the attempt in dir to its end, serving the lease on the
// listening socket lnFD. It returns the exit code SuperviseMain would, and
// whether this process is fit to take another attempt (the job's process
// group is gone).
func superviseDir(dir string, lnFD int) (code int, reusable bool) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "supervisor")
	tf, err := ReadTaskFile(dir)
	if err != nil {
		log.Error("cannot supervise", "dir", dir, "err", err)
		if lnFD >= 0 {
			unix.Close(lnFD)
		}
		return 1, false
	}
	setSupervisorProcs(tf.Driver)
	log = log.With("task", TaskID(tf.Attempt.JobID, tf.Attempt.Num))
	s := &supervisor{dir: dir, tf: tf, log: log, clock: SystemClock{}, lnFD: lnFD, cancelCh: make(chan string, 4)}
	if err := s.run(); err != nil {
		log.Error("supervisor failed", "err", err)
		return 1, false
	}
	return 0, !s.dirty
}

// listen returns the socket the agent passed in, or makes one (a supervisor
// started by hand, or by an agent that could not pre-listen).
func (s *supervisor) listen() (net.Listener, error) {
	if f := os.NewFile(uintptr(s.lnFD), "lease.sock"); f != nil {
		ln, err := net.FileListener(f)
		f.Close()
		if err == nil {
			return ln, nil
		}
	}
	path := filepath.Join(s.dir, LeaseSockName)
	os.Remove(path)
	return net.Listen("unix", path)
}

func (s *supervisor) run() error {
	if err := os.WriteFile(filepath.Join(s.dir, PIDFileName), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("write pid: %w", err)
	}
	ln, err := s.listen()
	if err != nil {
		return fmt.Errorf("lease socket: %w", err)
	}
	s.lease = NewLease(s.clock, s.tf.Lease.D())
	lease := s.tf.Lease.D()
	renew := func() {
		// A late renewal is a near fence: worth a line in supervisor.log
		// (an agent restart that took too long, a node losing contact).
		if since := s.lease.Renew(); since > lease/2 {
			s.log.Warn("lease renewed late", "since_last", since.Round(time.Millisecond), "lease", lease)
		}
	}
	srv := newControlServer(ln, renew, func(r string) {
		select {
		case s.cancelCh <- r:
		default: // a kill is already under way
		}
	})
	srv.running.Add(1) // before close can run
	go func() {
		defer srv.running.Done()
		srv.serve()
	}()
	defer func() {
		srv.close()
		srv.wait()
		os.Remove(filepath.Join(s.dir, LeaseSockName))
	}()

	res := s.execute(srv)
	// Not synced: a power loss before the report commits leaves the
	// attempt as one that was running at the loss (exec/DESIGN.md,
	// "result.json is not synced").
	if err := writeJSONAtomic(filepath.Join(s.dir, ResultFileName), res); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	srv.broadcast(msgFinished)
	s.log.Info("attempt finished", "state", res.State, "reason", res.Reason)
	return nil
}

// output holds the pipes and log writers of one stream.
type output struct {
	r, w *os.File
	lw   *logWriter
	done chan struct{}
}

func (s *supervisor) openOutput(name string, tailMax int) (*output, error) {
	lw, err := newLogWriter(filepath.Join(s.dir, name), s.tf.LogMaxBytes, tailMax)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		lw.Close()
		return nil, err
	}
	o := &output{r: r, w: w, lw: lw, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		io.Copy(lw, r)
	}()
	return o, nil
}

// finish waits for the job's output to reach the files.
func (o *output) finish() {
	o.w.Close() // no-op if already closed
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-o.done:
	case <-t.C:
		o.r.SetReadDeadline(time.Now())
		<-o.done
	}
	o.r.Close()
	o.lw.Close()
}

type started struct {
	h   Handle
	err error
}

// execute runs the task to the end and says how it ended. It never fails:
// every problem becomes a failed result with a reason.
func (s *supervisor) execute(srv *controlServer) *Result {
	fail := func(reason string) *Result {
		return &Result{State: fsm.AttemptFailed, Reason: reason, FinishedAt: time.Now()}
	}
	drv, err := LookupDriver(s.tf.Driver)
	if err != nil {
		return fail(err.Error())
	}
	stdout, err := s.openOutput(StdoutName, 0)
	if err != nil {
		return fail("open stdout log: " + err.Error())
	}
	stderr, err := s.openOutput(StderrName, fsm.StderrTailMax)
	if err != nil {
		stdout.finish()
		return fail("open stderr log: " + err.Error())
	}
	id := TaskID(s.tf.Attempt.JobID, s.tf.Attempt.Num)
	task := &Task{
		ID: id, Spec: s.tf.Spec, Env: s.tf.Env, Dir: s.dir,
		WorkDir:    filepath.Join(s.dir, WorkDirName),
		ResultFile: resultPath(s.dir), InputsDir: inputsDir(s.dir),
		ArtifactsDir: s.tf.ArtifactsDir, CheckpointDir: s.tf.CheckpointDir,
		Stdout: stdout.w, Stderr: stderr.w, ImageCache: s.tf.ImageCache,
		GPUs: s.tf.Attempt.Devices(), GPUShare: s.tf.Attempt.GPUShare, GPURoot: s.tf.GPURoot, DeviceCgroup: s.tf.DeviceCgroup,
		Volumes: s.tf.Volumes,
	}
	killSig, err := parseSignal(s.tf.Spec.KillSignal)
	if err != nil {
		stdout.finish()
		stderr.finish()
		return fail(err.Error())
	}
	killTimeout := s.tf.Spec.KillTimeout.D()
	if killTimeout <= 0 {
		killTimeout = DefaultKillTimeout
	}

	ctx, cancelStart := context.WithCancel(context.Background())
	defer cancelStart()
	startCh := make(chan started, 1)
	go func() {
		h, err := drv.Start(ctx, task)
		startCh <- started{h, err}
	}()

	var (
		h           Handle
		waitCh      chan ExitStatus
		startedAt   time.Time
		reason      string // first kill reason wins
		forceKilled bool
		killTimer   <-chan time.Time
		timeoutC    <-chan time.Time
	)
	// Every timer is stopped on return: a recycled supervisor must not
	// carry this attempt's timers into the next one.
	leaseTimer := time.NewTimer(s.lease.Remaining())
	defer leaseTimer.Stop()
	var timers []*time.Timer
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	after := func(d time.Duration) <-chan time.Time {
		t := time.NewTimer(d)
		timers = append(timers, t)
		return t.C
	}

	// kill starts the kill sequence; force skips the grace period.
	kill := func(r string, force bool) {
		if reason == "" {
			reason = r
			s.log.Info("killing job", "reason", r, "force", force)
		}
		if h == nil {
			cancelStart()
			return
		}
		if force {
			if !forceKilled {
				forceKilled = true
				h.Signal(syscall.SIGKILL)
			}
			return
		}
		if killTimer == nil {
			h.Signal(killSig)
			killTimer = after(killTimeout)
		}
	}

	for {
		select {
		case st := <-startCh:
			stdout.w.Close()
			stderr.w.Close()
			if st.err != nil {
				stdout.finish()
				stderr.finish()
				r := fail(st.err.Error())
				if reason != "" {
					r.State, r.Reason = fsm.AttemptKilled, reason
				}
				r.StderrTail = stderr.lw.Tail()
				return r
			}
			h, startedAt = st.h, time.Now()
			if ph, ok := h.(*processHandle); ok {
				os.WriteFile(filepath.Join(s.dir, JobPIDFileName), []byte(strconv.Itoa(ph.pgid)), 0o644)
			}
			srv.broadcast(msgStarted + " " + startedAt.UTC().Format(time.RFC3339Nano))
			waitCh = make(chan ExitStatus, 1)
			go func() { waitCh <- h.Wait() }()
			if reason != "" { // fenced or cancelled while starting
				r := reason
				reason = ""
				kill(r, r == fsm.ReasonFenced)
			}
			if t := s.tf.Spec.Timeout.D(); t > 0 {
				timeoutC = after(t)
			}
		case st := <-waitCh:
			if err := h.Destroy(); err != nil {
				s.log.Warn("destroy", "err", err)
				s.dirty = true
			}
			if ph, ok := h.(*processHandle); ok && !waitGroupGone(ph.pgid) {
				s.log.Warn("the job's process group outlived SIGKILL", "pgid", ph.pgid)
				s.dirty = true
			}
			stdout.finish()
			stderr.finish()
			r := s.result(st, reason, startedAt, stderr.lw.Tail())
			var err error
			if r.JobResult, r.JobResultTruncated, err = readResultFile(s.dir); err != nil {
				s.log.Warn("job result not read", "err", err)
			}
			max := s.tf.ArtifactsMaxBytes
			if max <= 0 {
				max = DefaultArtifactsMaxBytes
			}
			r.Artifacts, r.ArtifactsWarning = collectArtifacts(s.dir, max)
			return r
		case <-leaseTimer.C:
			if s.lease.Expired() {
				// Fencing must finish within the leader's margin, so no grace.
				kill(fsm.ReasonFenced, true)
				continue
			}
			leaseTimer.Reset(s.lease.Remaining())
		case r := <-s.cancelCh:
			if r == "" {
				r = fsm.ReasonCancelled
			}
			// A superseded attempt already has a replacement elsewhere:
			// no grace period, exactly like a lease expiry.
			kill(r, r == reasonSuperseded || r == fsm.ReasonFenced)
		case <-timeoutC:
			kill(fsm.ReasonTimeout, false)
		case <-killTimer:
			kill(reason, true)
		}
	}
}

func (s *supervisor) result(st ExitStatus, reason string, startedAt time.Time, tail string) *Result {
	r := &Result{
		Signal: st.Signal, OOM: st.OOM, StartedAt: startedAt, FinishedAt: st.FinishedAt,
		PeakMemoryB: st.PeakMemoryB, CPUTimeNs: st.CPUTimeNs, StderrTail: tail,
	}
	if !st.StartedAt.IsZero() {
		r.StartedAt = st.StartedAt
	}
	if r.FinishedAt.IsZero() {
		r.FinishedAt = time.Now()
	}
	if st.Signal == "" && st.Err == nil {
		code := st.ExitCode
		r.ExitCode = &code
	}
	switch {
	case reason != "":
		r.State, r.Reason = fsm.AttemptKilled, reason
	case st.OOM:
		r.State, r.Reason = fsm.AttemptKilled, fsm.ReasonOOM
	case st.Err != nil:
		r.State, r.Reason = fsm.AttemptFailed, st.Err.Error()
	case st.Signal != "":
		r.State, r.Reason = fsm.AttemptFailed, "killed by "+st.Signal
	case st.ExitCode == 0:
		r.State = fsm.AttemptSucceeded
	default:
		r.State, r.Reason = fsm.AttemptFailed, fmt.Sprintf("exit code %d", st.ExitCode)
	}
	return r
}

// parseSignal accepts "SIGTERM", "TERM", "term" or a number; "" is SIGTERM.
func parseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		s = DefaultKillSignal
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := s
	if len(name) < 3 || (name[:3] != "SIG" && name[:3] != "sig") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(strings.ToUpper(name)); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("%w: kill_signal %q is not a signal", ErrBadSignal, s)
}

// startProcs is GOMAXPROCS as the runtime chose it for this process.
var startProcs = runtime.GOMAXPROCS(0)

// setSupervisorProcs runs a process-driver attempt's supervisor on one P.
// Its goroutines (lease server, two output copiers, the waiter, the event
// loop) spend their lives blocked and wake one another in turn; with a P
// per core every wake-up could land on another thread, and the idle Ps'
// spinning in the scheduler cost ~20% of the supervisor's CPU per no-op
// attempt (BenchmarkRecycledAttempts, 2 cores). Blocking syscalls release
// the P, so the lease timer still fires while the job is being forked or
// reaped. Other drivers (libcontainer starts) keep the runtime's default.
func setSupervisorProcs(driver string) {
	want := startProcs
	if driver == ProcessDriverName {
		want = 1
	}
	if runtime.GOMAXPROCS(0) != want {
		runtime.GOMAXPROCS(want)
	}
}
