package exec

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// awaitExit parks in the netpoller while the process runs (no thread held
// in a blocking wait) and returns once it has exited, not before.
func TestAwaitExitParksUntilTheProcessExits(t *testing.T) {
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "3600"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Kill()
	done := make(chan bool, 1)
	go func() { done <- awaitExit(p.Pid) }()

	// sleep runs until the test kills it: until then awaitExit must not
	// return, and must come to rest parked on the pidfd.
	for deadline := time.Now().Add(10 * time.Second); !parkedInAwaitExit(); runtime.Gosched() {
		select {
		case <-done:
			t.Fatal("awaitExit returned while the process still ran")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("awaitExit never parked in the netpoller")
		}
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("awaitExit found no pollable pidfd")
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil || info.Signo == 0 {
		t.Fatalf("awaitExit returned but the process is not waitable (err %v)", err)
	}
}

// parkedInAwaitExit: some goroutine waits in awaitExit for its fd to
// become readable.
func parkedInAwaitExit() bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "exec.awaitExit") && strings.Contains(g, "waitRead") {
			return true
		}
	}
	return false
}
