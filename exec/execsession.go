package exec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// foreman exec: a command run inside a live attempt, from the agent (not
// the supervisor: the supervisor's job is the attempt, and it never
// serves requests). The driver decides what "inside" means: the
// container driver joins the attempt's container (namespaces, cgroup,
// rootfs, user); the process driver runs it beside the job, on the host,
// with the job's user, working directory and environment, since a
// process job has no isolation to enter. Either way the command is the
// exec's own: killing it (the client went away) never touches the job,
// and it is killed when the attempt ends.

// Execer is implemented by drivers that can run another command inside a
// live attempt. The agent calls Exec from a request's goroutine while the
// attempt's supervisor runs the attempt.
type Execer interface {
	Exec(t *ExecTask) (ExecProcess, error)
}

// ExecTask is one command to run inside attempt ID.
type ExecTask struct {
	ID      string    // the attempt's TaskID
	File    *TaskFile // the attempt's task.json
	WorkDir string    // the job's working directory on the host
	Command []string
	// Without TTY: the files the command gets as its stdio (Stdin nil:
	// /dev/null); the caller closes its copies once Exec returns.
	Stdin, Stdout, Stderr *os.File
	// TTY: run on a new terminal of this size; ExecProcess.Console is its
	// master side.
	TTY           bool
	Width, Height uint16
}

// ExecProcess is a started exec command.
type ExecProcess interface {
	// Console is the terminal's master side with TTY, else nil.
	Console() *os.File
	// Wait blocks until the command exited and returns its exit code
	// (128+N when signal N killed it).
	Wait() (int, error)
	// Kill ends the command and its process group, never the attempt.
	Kill() error
}

// ExecRequest is what the agent asks StartExec to run.
type ExecRequest struct {
	Command       []string
	TTY, Stdin    bool
	Width, Height uint16
}

// execDrain bounds how long the output of an exited command is still
// read: a background child of the command may hold the pipe open.
const execDrain = 2 * time.Second

// ExecSession is a command started by StartExec. Stdin (nil without
// ExecRequest.Stdin), Stdout and Stderr (nil with TTY: the terminal is
// Stdout) are the caller's ends of its stdio.
type ExecSession struct {
	proc    ExecProcess
	console *os.File
	stdin   io.WriteCloser
	stdout  io.ReadCloser
	stderr  io.ReadCloser

	done chan struct{}
	code int
	err  error
	once sync.Once
}

// Stdin is where the command's input goes (nil: it has none).
func (s *ExecSession) Stdin() io.WriteCloser { return s.stdin }

// Stdout is the command's output (the terminal with TTY).
func (s *ExecSession) Stdout() io.Reader { return s.stdout }

// Stderr is the command's error output (nil with TTY).
func (s *ExecSession) Stderr() io.Reader {
	if s.stderr == nil {
		return nil
	}
	return s.stderr
}

// Resize sets the terminal's size; nothing without TTY.
func (s *ExecSession) Resize(width, height uint16) error {
	if s.console == nil {
		return nil
	}
	return unix.IoctlSetWinsize(int(s.console.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: width, Row: height})
}

// Kill ends the command (never the attempt); Wait then returns.
func (s *ExecSession) Kill() { _ = s.proc.Kill() }

// Wait returns the command's exit code once it exited; its output readers
// end at most execDrain later.
func (s *ExecSession) Wait() int {
	<-s.done
	return s.code
}

// Err is why the command's end could not be read (after Wait).
func (s *ExecSession) Err() error {
	<-s.done
	return s.err
}

// StartExec starts req.Command inside attempt of job jobID on this node.
// ErrNoSuchAttempt: the attempt's files are not here; ErrAttemptEnded: it
// has finished; ErrExecUnsupported: its driver cannot; ErrExecStart (or
// ErrCommandNotFound): the command could not start.
func (w *Worker) StartExec(jobID string, attempt int, req ExecRequest) (*ExecSession, error) {
	if len(req.Command) == 0 || req.Command[0] == "" {
		return nil, ErrNoCommand
	}
	dir := w.AttemptDir(jobID, attempt)
	tf, err := ReadTaskFile(dir)
	if errors.Is(err, ErrBadTaskFile) && !exists(filepath.Join(dir, TaskFileName)) {
		return nil, fmt.Errorf("%w: job %s attempt %d", ErrNoSuchAttempt, jobID, attempt)
	}
	if err != nil {
		return nil, err
	}
	if exists(filepath.Join(dir, ResultFileName)) {
		return nil, fmt.Errorf("%w: attempt %d of job %s has finished on %s", ErrAttemptEnded, attempt, jobID, w.cfg.Node)
	}
	d, err := LookupDriver(tf.Driver)
	if err != nil {
		return nil, err
	}
	ex, ok := d.(Execer)
	if !ok {
		return nil, fmt.Errorf("%w: the %s driver runs no process to exec into", ErrExecUnsupported, tf.Driver)
	}
	t := &ExecTask{ID: TaskID(jobID, attempt), File: tf, WorkDir: filepath.Join(dir, WorkDirName),
		Command: req.Command, TTY: req.TTY, Width: req.Width, Height: req.Height}
	s := &ExecSession{done: make(chan struct{})}
	var theirs []*os.File // the command's ends: closed here once it started
	closeTheirs := func() {
		for _, f := range theirs {
			f.Close()
		}
	}
	fail := func(err error) (*ExecSession, error) {
		closeTheirs()
		for _, c := range []io.Closer{s.stdin, s.stdout, s.stderr} {
			if c != nil {
				c.Close()
			}
		}
		return nil, err
	}
	if !req.TTY {
		if req.Stdin {
			r, wr, err := os.Pipe()
			if err != nil {
				return fail(err)
			}
			t.Stdin, s.stdin, theirs = r, wr, append(theirs, r)
		}
		for _, out := range []struct {
			mine  *io.ReadCloser
			their **os.File
		}{{&s.stdout, &t.Stdout}, {&s.stderr, &t.Stderr}} {
			r, wr, err := os.Pipe()
			if err != nil {
				return fail(err)
			}
			*out.mine, *out.their, theirs = r, wr, append(theirs, wr)
		}
	}
	p, err := ex.Exec(t)
	if err != nil {
		return fail(err)
	}
	closeTheirs()
	s.proc = p
	if req.TTY {
		s.console = p.Console()
		s.stdout = s.console
		if req.Stdin {
			s.stdin = ttyInput{s.console} // the end of stdin is not the end of the terminal
		}
	}
	go s.wait()
	go w.killAtAttemptEnd(dir, s)
	w.log.Info("exec started", "job", jobID, "attempt", attempt, "driver", tf.Driver, "tty", req.TTY)
	return s, nil
}

// wait records the exit code, then gives the output execDrain to reach
// its readers before closing them (a background child may hold a pipe).
func (s *ExecSession) wait() {
	s.code, s.err = s.proc.Wait()
	close(s.done)
	time.AfterFunc(execDrain, func() {
		s.once.Do(func() {
			for _, c := range []io.Closer{s.stdout, s.stderr} {
				if c != nil {
					c.Close()
				}
			}
		})
	})
}

// killAtAttemptEnd kills the command when the attempt finishes, so it
// never outlives it (a container's pid namespace does that too; a process
// job has nothing of the kind).
func (w *Worker) killAtAttemptEnd(dir string, s *ExecSession) {
	for {
		ended := w.attemptEnded() // before looking: an end after the look wakes us
		if exists(filepath.Join(dir, ResultFileName)) {
			s.Kill()
			return
		}
		select {
		case <-s.done:
			return
		case <-ended:
		}
	}
}

// ExecExitCode is a finished command's exit code as a shell reports it:
// 128+N when signal N killed it.
func ExecExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// PollableFile returns a non-blocking duplicate of fd (the caller keeps
// and closes its own), so that closing it ends a Read blocked on it (a
// terminal a background child still holds open).
func PollableFile(fd uintptr, name string) (*os.File, error) {
	nfd, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return nil, err
	}
	return os.NewFile(uintptr(nfd), name), nil
}

// ttyInput writes to a terminal; Close leaves it open.
type ttyInput struct{ f *os.File }

func (t ttyInput) Write(p []byte) (int, error) { return t.f.Write(p) }
func (t ttyInput) Close() error                { return nil }
