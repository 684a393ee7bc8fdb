package container

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/exec"
)

// killSignal kills the container's init, and with it its pid namespace.
const killSignal = unix.SIGKILL

// handle is a started container. Wait may be called from any goroutine and
// any number of times; Destroy is idempotent.
type handle struct {
	d       *Driver
	c       *libcontainer.Container
	p       *libcontainer.Process
	cg      *cgroups.Cgroup
	paths   map[string]string // cloned: Destroy empties libcontainer's map
	started time.Time

	waitOnce sync.Once
	done     chan struct{}
	status   exec.ExitStatus

	mu        sync.Mutex
	destroyed bool
}

func newHandle(d *Driver, c *libcontainer.Container, p *libcontainer.Process, cg *cgroups.Cgroup, paths map[string]string, started time.Time) *handle {
	h := &handle{d: d, c: c, p: p, cg: cg, paths: paths, started: started, done: make(chan struct{})}
	go h.reap()
	return h
}

// reap waits for the init (the shim) to exit, then reads the cgroup
// counters while the cgroup still exists (before any Destroy).
func (h *handle) reap() {
	ps, err := h.p.Wait()
	st := exec.ExitStatus{StartedAt: h.started, FinishedAt: time.Now()}
	switch {
	case ps == nil:
		st.ExitCode, st.Err = -1, fmt.Errorf("container %s: wait: %w", h.c.ID(), err)
	default:
		ws, _ := ps.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			st.ExitCode, st.Signal = -1, unix.SignalName(ws.Signal())
		} else {
			st.ExitCode = ws.ExitStatus()
		}
	}
	u := readUsage(h.cg, h.paths)
	st.OOM, st.PeakMemoryB, st.CPUTimeNs = u.oomKills > 0, u.peakMemory, u.cpuNs
	h.status = st
	close(h.done)
}

// Wait implements exec.Handle.
func (h *handle) Wait() exec.ExitStatus {
	<-h.done
	return h.status
}

// Signal implements exec.Handle. The signal goes to the container's init:
// the shim forwards it to the job's process group; SIGKILL ends the whole
// pid namespace. Signalling an exited container is not an error.
func (h *handle) Signal(sig syscall.Signal) error {
	select {
	case <-h.done:
		return nil
	default:
	}
	if sig != killSignal && sig != syscall.SIGSTOP && h.d.shim != "" {
		if st, err := h.c.State(); err == nil {
			awaitShim(st.InitProcessPid, ShimTarget, sig, shimReadyTimeout)
		}
	}
	if err := h.c.Signal(sig); err != nil && !errors.Is(err, libcontainer.ErrNotRunning) && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("container %s: signal %s: %w", h.c.ID(), unix.SignalName(sig), err)
	}
	return nil
}

// Destroy implements exec.Handle: kill anything left, wait for the init to
// be reaped (so usage is recorded), then remove the cgroups and state dir.
func (h *handle) Destroy() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.destroyed {
		return nil
	}
	select {
	case <-h.done:
	default:
		_ = h.c.Signal(killSignal)
		select {
		case <-h.done:
		case <-time.After(h.d.cfg.DestroyTimeout):
			return fmt.Errorf("container %s: init not reaped %s after SIGKILL", h.c.ID(), h.d.cfg.DestroyTimeout)
		}
	}
	if err := h.c.Destroy(); err != nil {
		return fmt.Errorf("container %s: destroy: %w", h.c.ID(), err)
	}
	h.destroyed = true
	return nil
}
