package container

import (
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCShim runs this test binary as `shim -- CMD` outside any container:
// the C constructor (shim_linux.c) must take over before the Go runtime
// starts (one thread, where a Go process has several) and behave exactly
// as exec.ShimMain (exec.TestShim has the same cases).
func TestCShim(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		signal syscall.Signal // sent to the shim once the child is running; 0 = none
		exit   int
	}{
		{name: "exit-code", args: []string{"sh", "-c", "exit 3"}, exit: 3},
		{name: "sigterm-forwarded", args: []string{"sleep", "60"}, signal: syscall.SIGTERM, exit: 128 + 15},
		{name: "sigint-forwarded", args: []string{"sleep", "60"}, signal: syscall.SIGINT, exit: 128 + 2},
		{name: "trap-handler", args: []string{"sh", "-c", "trap 'exit 7' TERM; touch ready; while :; do sleep 0.05; done"}, signal: syscall.SIGTERM, exit: 7},
		{name: "missing", args: []string{"no-such-cmd-xyz"}, exit: 127},
		{name: "not-executable", args: []string{"./plain"}, exit: 126},
		{name: "reaps-orphans", args: []string{"sh", "-c", "(sleep 0.1 &) ; sleep 0.3; exit 4"}, exit: 4},
		{name: "no-command", args: nil, exit: 127},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "plain"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := osexec.Command(exe, append([]string{"shim", "--"}, tc.args...)...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			if tc.signal != 0 {
				pid := cmd.Process.Pid
				deadline := time.Now().Add(10 * time.Second)
				for !(shimChild(pid) && (tc.name != "trap-handler" || fileExists(filepath.Join(dir, "ready")))) {
					if time.Now().After(deadline) {
						cmd.Process.Kill()
						t.Fatal("the shim's child did not start")
					}
					time.Sleep(time.Millisecond)
				}
				if n := threads(pid); n != 1 {
					t.Errorf("the shim has %d threads: the Go runtime started (the C shim did not run)", n)
				}
				cmd.Process.Signal(tc.signal)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
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
				t.Errorf("exit = %d, want %d (stderr %q)", code, tc.exit, stderr.String())
			}
		})
	}
}

func shimChild(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	return len(strings.TrimSpace(string(b))) > 0
}

func threads(pid int) int {
	es, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	return len(es)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestValidIDMatchesPattern: the hand-written check accepts exactly what
// validIDPattern does.
func TestValidIDMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(validIDPattern)
	cases := []string{"", "a", "A9", "job-1", "job_1.2+3", "-a", "_a", ".a", "+a", "a/b", "a b", "ä", "a\x00",
		strings.Repeat("a", 128), strings.Repeat("a", 129), "a" + strings.Repeat("-", 127), "9" + strings.Repeat(".", 128)}
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "x"+string([]byte{byte(c)}))
	}
	for _, id := range cases {
		if got, want := validID(id), re.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}
