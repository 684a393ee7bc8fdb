package netns

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// LockPath serialises real-tier runs across processes: every run uses the
// same names and subnet, and Sweep would tear down a concurrent run's
// namespaces (go test ./... runs packages in parallel).
const LockPath = "/run/foreman-jepsen.lock"

// Lock waits (at most wait) for the machine-wide suite lock and returns
// its release function.
func Lock(wait time.Duration) (func(), error) {
	f, err := os.OpenFile(LockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another jepsen run holds %s after %v: %w", LockPath, wait, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
