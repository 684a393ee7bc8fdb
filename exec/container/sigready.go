package container

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// shimReadyTimeout bounds how long Signal waits for the shim to be ready.
// The kernel drops a signal sent to a pid namespace's init that has no
// handler, and until the shim has called signal.Notify a SIGTERM either
// hits runc's init (before exec) or the Go runtime's default handler
// (exit 2). The shim subscribes before it starts the job, so "the shim
// has a child" means it is ready.
const shimReadyTimeout = 2 * time.Second

// awaitShim polls /proc/<pid> until pid runs argv0 and has a child, the
// process is gone, or the timeout passes. It returns whether it is ready.
func awaitShim(pid int, argv0 string, sig syscall.Signal, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return false
		}
		if runs(pid, argv0) {
			kids, err := hasChildren(pid)
			if kids {
				return true
			}
			if errors.Is(err, fs.ErrNotExist) { // no CONFIG_PROC_CHILDREN: best effort
				if caught, _ := catches(pid, sig); caught {
					return true
				}
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond) // a handshake with another process, not test sync
	}
}

func runs(pid int, argv0 string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\x00")
	return first == argv0
}

// hasChildren checks every thread: a child belongs to the thread that
// forked it, which in a Go program is any of them.
func hasChildren(pid int) (bool, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, err
	}
	var lastErr error
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			lastErr = err
			continue
		}
		if strings.TrimSpace(string(b)) != "" {
			return true, nil
		}
	}
	return false, lastErr
}

// catches reports whether pid has a handler for sig (SigCgt).
func catches(pid int, sig syscall.Signal) (bool, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "SigCgt:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, err
			}
			return mask&(1<<(uint(sig)-1)) != 0, nil
		}
	}
	return false, fmt.Errorf("no SigCgt in /proc/%d/status", pid)
}
