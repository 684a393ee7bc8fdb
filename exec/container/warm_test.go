package container

import (
	"os"
	osexec "os/exec"
	"strconv"
	"testing"

	"github.com/opencontainers/cgroups"

	"github.com/foreman-sched/foreman/fsm"
)

// TestWarmOpensProcessWideHandles: after Warm, starting and destroying
// containers leaves no descriptor open in this process, which is what a
// recycled supervisor's cleanliness check compares (exec/recycle.go). It
// runs in a fresh copy of the test binary, where nothing has opened
// libcontainer's or cgroups' process-wide handles yet.
func TestWarmOpensProcessWideHandles(t *testing.T) {
	requireContainers(t)
	if os.Getenv("FOREMAN_WARM_CHILD") == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := osexec.Command(exe, "-test.run", "^TestWarmOpensProcessWideHandles$", "-test.v")
		cmd.Env = append(os.Environ(), "FOREMAN_WARM_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fresh process: %v\n%s", err, out)
		}
		return
	}
	d := newTestDriver(t, nil)
	if err := d.Warm(); err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	for i := range 2 {
		t.Run("start-"+strconv.Itoa(i), func(t *testing.T) { // its Cleanup closes the task's files
			if r := run(t, d, fsm.JobSpec{Command: []string{"/bin/true"}}); r.status.ExitCode != 0 {
				t.Fatalf("exit %d: %s", r.status.ExitCode, r.stderr)
			}
		})
	}
	after := openFDs(t)
	for fd, what := range after {
		if before[fd] != what {
			t.Errorf("fd %d (%s) was opened by a container start and is still open", fd, what)
		}
	}
}

// openFDs maps this process's descriptors to what they point at.
func openFDs(t *testing.T) map[int]string {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd"
	out := map[int]string{}
	for _, e := range es {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || target == self {
			continue // the directory being read, closed by now
		}
		out[fd] = target
	}
	return out
}

// TestPrimeAttachLockKeepsOurCgroup: the primer's migration is into the
// cgroup this process is already in.
func TestPrimeAttachLockKeepsOurCgroup(t *testing.T) {
	requireContainers(t)
	dir := ownPidsCgroupDir()
	if dir == "" {
		t.Fatal("own pids cgroup not found")
	}
	before, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if err := cgroups.WriteCgroupProc(dir, 0); err != nil {
		t.Fatalf("no-op migration into %s: %v", dir, err)
	}
	after, _ := os.ReadFile("/proc/self/cgroup")
	if string(after) != string(before) {
		t.Errorf("cgroups changed:\n%s\nwas\n%s", after, before)
	}
}
