package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/exec/gpu"
)

// ProcessDriverName is the JobSpec.Driver value of the process driver.
const ProcessDriverName = "process"

// defaultPath is used when the job's environment has no PATH.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ProcessDriver runs the job as a plain child process in its own process
// group. It sets no resource limits: cgroup limits, OOM detection and
// isolation are the container driver's job. Peak RSS and CPU time come from
// the rusage of wait4 (the job and the children it waited for).
type ProcessDriver struct{}

// NewProcessDriver returns the process driver.
func NewProcessDriver() *ProcessDriver { return &ProcessDriver{} }

// Name implements Driver.
func (*ProcessDriver) Name() string { return ProcessDriverName }

// Available implements Driver: fork/exec with process groups needs a Unix.
func (*ProcessDriver) Available() error {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && !strings.HasSuffix(runtime.GOOS, "bsd") {
		return fmt.Errorf("process driver: unsupported OS %s", runtime.GOOS)
	}
	return nil
}

// Start implements Driver.
func (*ProcessDriver) Start(ctx context.Context, t *Task) (Handle, error) {
	if len(t.Spec.Command) == 0 || t.Spec.Command[0] == "" {
		return nil, ErrNoCommand
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := lookPath(t.Spec.Command[0], envValue(t.Env, "PATH", defaultPath), t.WorkDir)
	if err != nil {
		return nil, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	sys := &syscall.SysProcAttr{
		Setpgid: true,
		// The supervisor is the fence: if it dies, nobody enforces the lease,
		// so the job must die with it. (The supervisor never exits threads,
		// the job launcher's included, so the "parent thread" caveat of
		// Pdeathsig does not bite.)
		Pdeathsig: syscall.SIGKILL,
	}
	if t.Spec.User != "" {
		cred, err := credential(t.Spec.User)
		if err != nil {
			return nil, err
		}
		sys.Credential = cred
	}
	env, dc, err := processGPU(t)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	p, err := startJobProcess(path, t.Spec.Command, &os.ProcAttr{
		Dir:   t.WorkDir,
		Env:   env,
		Files: []*os.File{devnull, t.Stdout, t.Stderr},
		Sys:   sys,
	}, dc)
	if err != nil {
		if dc != nil {
			dc.Remove()
		}
		return nil, fmt.Errorf("start %q: %w", t.Spec.Command[0], err)
	}
	return &processHandle{p: p, pgid: p.Pid, startedAt: started, dc: dc}, nil
}

// lookPath resolves argv[0] like a shell would, but against the job's PATH
// and working directory rather than the supervisor's.
func lookPath(file, pathEnv, workDir string) (string, error) {
	notFound := &notFoundError{cmd: file}
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(workDir, p)
		}
		if isExecutable(p) {
			return p, nil
		}
		return "", notFound
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(workDir, dir)
		}
		if p := filepath.Join(dir, file); isExecutable(p) {
			return p, nil
		}
	}
	return "", notFound
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func envValue(env []string, key, def string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return def
}

// credential maps "name", "uid" or "uid:gid" to a credential.
func credential(spec string) (*syscall.Credential, error) {
	name, group, _ := strings.Cut(spec, ":")
	var uid, gid uint64
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		uid, gid = n, n
	} else {
		u, g, err := lookupUser(name)
		if err != nil {
			return nil, fmt.Errorf("user %q: %w", name, err)
		}
		uid, _ = strconv.ParseUint(u, 10, 32)
		gid, _ = strconv.ParseUint(g, 10, 32)
	}
	if group != "" {
		n, err := strconv.ParseUint(group, 10, 32)
		if err != nil {
			g, err := lookupGroupID(group)
			if err != nil {
				return nil, fmt.Errorf("group %q: %w", group, err)
			}
			n, _ = strconv.ParseUint(g, 10, 32)
		}
		gid = n
	}
	if os.Geteuid() != 0 && uint64(os.Geteuid()) != uid {
		return nil, fmt.Errorf("user %q: the agent is not root and cannot switch users", spec)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

type processHandle struct {
	p         *os.Process
	pgid      int
	startedAt time.Time
	dc        *gpu.DeviceCgroup // nil: no GPU isolation on this host

	once   sync.Once
	status ExitStatus
}

// Wait implements Handle. It may be called more than once.
func (h *processHandle) Wait() ExitStatus {
	h.once.Do(func() {
		awaitExit(h.p.Pid)
		ps, err := h.p.Wait()
		st := ExitStatus{StartedAt: h.startedAt, FinishedAt: time.Now()}
		if err != nil {
			st.ExitCode, st.Err = -1, fmt.Errorf("wait: %w", err)
			h.status = st
			return
		}
		st.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.ExitCode, st.Signal = -1, unix.SignalName(ws.Signal())
		}
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			st.PeakMemoryB = ru.Maxrss * 1024 // KiB on Linux
			st.CPUTimeNs = syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)
		}
		h.status = st
	})
	return h.status
}

// Signal implements Handle: the whole process group gets sig.
func (h *processHandle) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-h.pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

// Destroy implements Handle: kill whatever is left in the group (a job's
// background children) so nothing outlives the attempt, and remove the
// job's device cgroup.
func (h *processHandle) Destroy() error {
	err := h.Signal(syscall.SIGKILL)
	if h.dc != nil {
		err = errors.Join(err, h.dc.Remove())
	}
	return err
}

// notFoundError reads `command "x" not found` and matches ErrCommandNotFound.
type notFoundError struct{ cmd string }

func (e *notFoundError) Error() string { return fmt.Sprintf("command %q not found", e.cmd) }
func (e *notFoundError) Unwrap() error { return ErrCommandNotFound }
