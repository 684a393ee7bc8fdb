package exec

import (
	"fmt"
	"os"
	"syscall"

	"github.com/containerd/console"
)

var _ Execer = (*ProcessDriver)(nil)

// Exec implements Execer. A process job has no isolation to enter: the
// command runs on the host beside the job, as the job's user, in its
// working directory, with its environment (FOREMAN_* included), in a
// process group of its own (a session with TTY) so that Kill ends it and
// its children without touching the job.
func (*ProcessDriver) Exec(t *ExecTask) (ExecProcess, error) {
	env := t.File.Env
	if envValue(env, "PATH", "") == "" {
		env = append(append([]string(nil), env...), "PATH="+defaultPath)
	}
	path, err := lookPath(t.Command[0], envValue(env, "PATH", defaultPath), t.WorkDir)
	if err != nil {
		return nil, err
	}
	sys := &syscall.SysProcAttr{Setpgid: !t.TTY, Setsid: t.TTY, Setctty: t.TTY}
	if t.File.Spec.User != "" {
		cred, err := credential(t.File.Spec.User)
		if err != nil {
			return nil, err
		}
		sys.Credential = cred
	}
	files := []*os.File{t.Stdin, t.Stdout, t.Stderr}
	var master console.Console
	if t.TTY {
		m, slavePath, err := console.NewPty()
		if err != nil {
			return nil, fmt.Errorf("%w: a terminal: %v", ErrExecStart, err)
		}
		if t.Width > 0 && t.Height > 0 {
			_ = m.Resize(console.WinSize{Width: t.Width, Height: t.Height})
		}
		slave, err := os.OpenFile(slavePath, os.O_RDWR|syscall.O_NOCTTY, 0)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("%w: open %s: %v", ErrExecStart, slavePath, err)
		}
		defer slave.Close()
		if sys.Credential != nil {
			_ = slave.Chown(int(sys.Credential.Uid), -1)
		}
		master, files = m, []*os.File{slave, slave, slave}
		sys.Ctty = 0 // the child's fd 0
	}
	if files[0] == nil {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		defer devnull.Close()
		files[0] = devnull
	}
	p, err := startProcess(path, t.Command, &os.ProcAttr{Dir: t.WorkDir, Env: env, Files: files, Sys: sys})
	if err != nil {
		if master != nil {
			master.Close()
		}
		return nil, fmt.Errorf("%w: %q: %v", ErrExecStart, t.Command[0], err)
	}
	pe := &processExec{p: p}
	if master != nil {
		pe.console, err = PollableFile(master.Fd(), "pty")
		master.Close()
		if err != nil {
			_ = pe.Kill()
			_, _ = p.Wait()
			return nil, fmt.Errorf("%w: the terminal: %v", ErrExecStart, err)
		}
	}
	return pe, nil
}

type processExec struct {
	p       *os.Process
	console *os.File
}

func (e *processExec) Console() *os.File { return e.console }

func (e *processExec) Wait() (int, error) {
	ps, err := e.p.Wait()
	if err != nil {
		return -1, err
	}
	return ExecExitCode(ps), nil
}

// Kill ends the command's group: the command leads it (Setpgid/Setsid).
func (e *processExec) Kill() error {
	if err := syscall.Kill(-e.p.Pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}
