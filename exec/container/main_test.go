package container

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
)

// Named timeouts, generous for a slow shared 2-core machine.
const (
	startTimeout = 30 * time.Second
	waitTimeout  = 60 * time.Second
)

// TestMain plays main.go's role: the test binary is re-executed by
// libcontainer as `init`, and bind-mounted into containers as the shim.
func TestMain(m *testing.M) {
	InitIfRequested()
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(exec.ShimMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// requireContainers fails under CI=true and skips loudly elsewhere when
// this host cannot run containers.
func requireContainers(t testing.TB) {
	t.Helper()
	d, err := New(DefaultConfig(), nil)
	if err == nil {
		err = d.Available()
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("container tests need root and cgroups (CI=true): %v", err)
	}
	t.Skipf("SKIPPING container test: %v (run as root with cgroups; CI=true makes this a failure)", err)
}

// newTestDriver returns a driver with a private state root and cgroup
// parent, removed when the test ends.
func newTestDriver(t testing.TB, mutate func(*Config)) *Driver {
	t.Helper()
	requireContainers(t)
	cfg := DefaultConfig()
	cfg.StateRoot = t.TempDir()
	cfg.CgroupParent = "/foreman-test-" + strconv.Itoa(os.Getpid()) + "-" + filepath.Base(cfg.StateRoot)
	cfg.ImageCache = filepath.Join(cfg.StateRoot, "images")
	if mutate != nil {
		mutate(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeCgroupParent(t, cfg.CgroupParent) })
	return d
}

// result is what a finished container left behind.
type result struct {
	stdout, stderr string
	status         exec.ExitStatus
	workDir        string
}

// newTask builds a task with a fresh work dir and output files.
func newTask(t testing.TB, id string, spec fsm.JobSpec) *exec.Task {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o777); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close(); errf.Close() })
	return &exec.Task{ID: id, Spec: spec, Env: []string{"FOREMAN_TEST=1"}, Dir: dir, WorkDir: work, Stdout: out, Stderr: errf}
}

// run starts spec, waits for it and destroys it.
func run(t testing.TB, d *Driver, spec fsm.JobSpec) result {
	t.Helper()
	task := newTask(t, testID(t), spec)
	h, err := d.Start(context.Background(), task)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	st := waitFor(t, h)
	if err := h.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	return result{stdout: readFile(t, task.Stdout.Name()), stderr: readFile(t, task.Stderr.Name()), status: st, workDir: task.WorkDir}
}

func waitFor(t testing.TB, h exec.Handle) exec.ExitStatus {
	t.Helper()
	ch := make(chan exec.ExitStatus, 1)
	go func() { ch <- h.Wait() }()
	select {
	case st := <-ch:
		return st
	case <-time.After(waitTimeout):
		h.Destroy()
		t.Fatalf("container did not exit within %s", waitTimeout)
		return exec.ExitStatus{}
	}
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var idSeq int

func testID(t testing.TB) string {
	idSeq++
	return "t" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(idSeq)
}

// cgroupDirs lists where a cgroup path lives in every mounted hierarchy.
func cgroupDirs(t testing.TB, cg string) []string {
	t.Helper()
	var dirs []string
	for _, root := range []string{"/sys/fs/cgroup"} {
		es, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
			return []string{filepath.Join(root, cg)} // pure v2
		}
		for _, e := range es {
			if e.IsDir() || e.Type()&os.ModeSymlink != 0 {
				dirs = append(dirs, filepath.Join(root, e.Name(), cg))
			}
		}
	}
	return dirs
}

func removeCgroupParent(t testing.TB, parent string) {
	for _, d := range cgroupDirs(t, parent) {
		os.Remove(d) // only succeeds when empty; leftovers are reported by tests
	}
}

// hostMountNS is the test process's mount namespace at start.
var hostMountNS, _ = os.Readlink("/proc/self/ns/mnt")

// mountinfo reads the mount table of the namespace the test started in,
// through a thread still in it. /proc/self is the main thread, which after
// some container starts sits wedged in another mount namespace (observed
// with runc v1.5.2: a locked thread that setns'd and exited is not killed
// when it is the main thread), so /proc/self/mountinfo is not reliable.
func mountinfo(t testing.TB) []byte {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		dir := "/proc/self/task/" + task.Name()
		if ns, _ := os.Readlink(dir + "/ns/mnt"); ns == hostMountNS {
			if b, err := os.ReadFile(dir + "/mountinfo"); err == nil {
				return b
			}
		}
	}
	t.Fatalf("no thread left in mount namespace %s", hostMountNS)
	return nil
}

func assertErrorIs(t testing.TB, err, target error, contains string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v: want errors.Is %v", err, target)
	}
	if contains != "" && !bytes.Contains([]byte(err.Error()), []byte(contains)) {
		t.Fatalf("error %q: want it to contain %q", err, contains)
	}
}
