package exec

import (
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestShim(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		signal syscall.Signal // sent to the shim once the child is running; 0 = none
		exit   int
	}{
		{name: "exit-code", args: []string{"sh", "-c", "exit 3"}, exit: 3},
		{name: "sigterm-forwarded", args: []string{"sleep", "60"}, signal: syscall.SIGTERM, exit: 128 + 15},
		{name: "trap-handler", args: []string{"sh", "-c", "trap 'exit 7' TERM; touch ready; while :; do sleep 0.05; done"}, signal: syscall.SIGTERM, exit: 7},
		{name: "missing", args: []string{"no-such-cmd-xyz"}, exit: 127},
		{name: "reaps-orphans", args: []string{"sh", "-c", "(sleep 0.1 &) ; sleep 0.3; exit 4"}, exit: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd := osexec.Command(testBinary(t), append([]string{"shim", "--"}, tc.args...)...)
			cmd.Dir = dir
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.signal != 0 {
				// Wait until the child exists (the shim's only child) before signalling.
				waitFor(t, waitShort, "child to start", func() bool {
					return hasChildren(cmd.Process.Pid) && (tc.name != "trap-handler" || exists(filepath.Join(dir, "ready")))
				})
				cmd.Process.Signal(tc.signal)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(waitShort):
				cmd.Process.Kill()
				t.Fatal("shim did not exit")
			}
			code := 0
			var ee *osexec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.exit {
				t.Errorf("exit = %d, want %d", code, tc.exit)
			}
		})
	}
}

// hasChildren reports whether pid has a child (in any of its threads).
func hasChildren(pid int) bool {
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range files {
		if b, _ := os.ReadFile(f); len(b) > 0 {
			return true
		}
	}
	return false
}
