package container

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"

	"github.com/foreman-sched/foreman/fsm"
)

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func TestOutputAndExitCode(t *testing.T) {
	d := newTestDriver(t, nil)
	r := run(t, d, fsm.JobSpec{Command: sh("echo hello; echo oops >&2; exit 3")})
	if r.stdout != "hello\n" || r.stderr != "oops\n" {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	if r.status.ExitCode != 3 || r.status.Signal != "" || r.status.OOM || r.status.Err != nil {
		t.Fatalf("status %+v", r.status)
	}
	if r.status.FinishedAt.Before(r.status.StartedAt) {
		t.Fatalf("times %+v", r.status)
	}
}

func TestEnvUserAndWorkDir(t *testing.T) {
	d := newTestDriver(t, nil)
	r := run(t, d, fsm.JobSpec{User: "nobody", Command: sh(`echo "$FOREMAN_TEST $(id -u) $(pwd) $HOME"; grep CapEff /proc/self/status`)})
	lines := strings.Split(r.stdout, "\n")
	if lines[0] != "1 65534 /task /nonexistent" {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "CapEff:\t0000000000000000") {
		t.Fatalf("non-root job has effective capabilities: %q", r.stdout)
	}
	r = run(t, d, fsm.JobSpec{User: "1234:4321", Command: sh(`echo $(id -u):$(id -g)`)})
	if r.stdout != "1234:4321\n" {
		t.Fatalf("numeric user: %q %q", r.stdout, r.stderr)
	}
}

func TestOOMFromCgroupCounter(t *testing.T) {
	d := newTestDriver(t, nil)
	spec := fsm.JobSpec{Command: sh("head -c 300000000 /dev/zero | tail"), Resources: fsm.Resources{MemoryMB: 32}}
	r := run(t, d, spec)
	if !r.status.OOM {
		t.Fatalf("OOM not reported: %+v stderr %q", r.status, r.stderr)
	}
	if r.status.PeakMemoryB < 16<<20 || r.status.PeakMemoryB > 33<<20 {
		t.Fatalf("peak memory %d outside (16 MiB, 33 MiB]", r.status.PeakMemoryB)
	}
}

func TestPidsLimit(t *testing.T) {
	d := newTestDriver(t, func(c *Config) { c.PidsLimit = 20 })
	r := run(t, d, fsm.JobSpec{Command: sh("for i in $(seq 40); do sleep 30 & done; echo done")})
	if !strings.Contains(strings.ToLower(r.stderr), "fork") {
		t.Fatalf("want a fork failure with pids limit 20; stderr %q status %+v", r.stderr, r.status)
	}
}

func TestCPUQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("3 s CPU test skipped in -short")
	}
	d := newTestDriver(t, nil)
	const wall = 3 * time.Second
	spec := fsm.JobSpec{Resources: fsm.Resources{CPU: 500},
		Command: sh("(while :; do :; done) & (while :; do :; done) & sleep 3")}
	r := run(t, d, spec)
	cpu := time.Duration(r.status.CPUTimeNs)
	// Two busy loops could use 2 cores (6 s); 500m allows 1.5 s.
	if cpu > wall*6/10 || cpu < wall/10 {
		t.Fatalf("cpu time %s under 500m for %s: want about %s", cpu, wall, wall/2)
	}
	t.Logf("cpu time %s in %s wall under 500m", cpu, r.status.FinishedAt.Sub(r.status.StartedAt))
}

func TestSIGTERMEndsSleepViaShim(t *testing.T) {
	d := newTestDriver(t, nil)
	task := newTask(t, testID(t), fsm.JobSpec{Command: []string{"sleep", "60"}})
	h, err := d.Start(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy()
	sent := time.Now()
	if err := h.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st := waitFor(t, h)
	if took := time.Since(sent); took > 5*time.Second {
		t.Fatalf("SIGTERM took %s", took)
	}
	if st.ExitCode != 128+int(syscall.SIGTERM) {
		t.Fatalf("status %+v: want exit 143 from the shim", st)
	}
	if err := h.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal after exit: %v", err)
	}
}

func TestNetworkNoneHasOnlyLoopback(t *testing.T) {
	d := newTestDriver(t, nil)
	script := `ls /sys/class/net; python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.sendall(b"ping"); print(a.recv(4).decode())'`
	r := run(t, d, fsm.JobSpec{Command: sh(script)})
	if r.stdout != "lo\nping\n" {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
}

func TestNetworkHost(t *testing.T) {
	d := newTestDriver(t, nil)
	want, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range want {
		names = append(names, e.Name())
	}
	r := run(t, d, fsm.JobSpec{Network: "host", Command: sh("ls /sys/class/net; cat /etc/resolv.conf")})
	hostResolv, _ := os.ReadFile("/etc/resolv.conf")
	if r.stdout != strings.Join(names, "\n")+"\n"+string(hostResolv) {
		t.Fatalf("host network: stdout %q, want interfaces %v and the host resolv.conf; stderr %q", r.stdout, names, r.stderr)
	}
}

func TestFilesystemIsolation(t *testing.T) {
	d := newTestDriver(t, nil)
	script := `
test -e /etc/shadow && echo shadow-visible
test -e /etc/passwd || echo no-passwd
touch /usr/x 2>/dev/null && echo usr-writable
touch /x 2>/dev/null && echo root-writable
touch /etc/x 2>/dev/null && echo etc-writable
touch /tmp/x || echo tmp-readonly
echo data > /task/out || echo task-readonly
test -e /task/out && echo ok`
	r := run(t, d, fsm.JobSpec{Command: sh(script)})
	if r.stdout != "ok\n" {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	if got := readFile(t, filepath.Join(r.workDir, "out")); got != "data\n" {
		t.Fatalf("/task/out on host = %q", got)
	}
}

func TestBadInputClearErrors(t *testing.T) {
	d := newTestDriver(t, nil)
	before := mountinfo(t)
	cases := []struct {
		name     string
		spec     fsm.JobSpec
		target   error
		contains string
	}{
		{"missing command", fsm.JobSpec{Command: []string{"no-such-cmd"}}, ErrCommandNotFound, `command "no-such-cmd" not found in rootfs`},
		{"missing path", fsm.JobSpec{Command: []string{"/usr/bin/nope"}}, ErrCommandNotFound, `command "/usr/bin/nope" not found in rootfs`},
		{"host path outside rootfs", fsm.JobSpec{Command: []string{"/etc/shadow"}}, ErrCommandNotFound, "not found in rootfs"},
		{"no command", fsm.JobSpec{}, ErrNoCommand, ""},
		{"memory too low", fsm.JobSpec{Command: []string{"true"}, Resources: fsm.Resources{MemoryMB: 1}}, ErrMemoryTooLow, "memory limit too low"},
		{"unknown user", fsm.JobSpec{Command: []string{"true"}, User: "no-such-user"}, ErrUser, "no-such-user"},
		{"bad network", fsm.JobSpec{Command: []string{"true"}, Network: "bridge"}, ErrInvalidTask, "bridge"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Start(context.Background(), newTask(t, testID(t), tc.spec))
			assertErrorIs(t, err, tc.target, tc.contains)
		})
	}
	if entries, _ := os.ReadDir(d.cfg.containersDir()); len(entries) != 0 {
		t.Fatalf("state left behind: %v", entries)
	}
	if after := mountinfo(t); string(after) != string(before) {
		t.Fatalf("mounts changed")
	}
}

// TestMemoryLimitAtMinimum starts at the smallest accepted limit: it must
// either run or fail saying the limit is too low, never something obscure.
func TestMemoryLimitAtMinimum(t *testing.T) {
	d := newTestDriver(t, nil)
	task := newTask(t, testID(t), fsm.JobSpec{Command: []string{"true"}, Resources: fsm.Resources{MemoryMB: minMemoryMB}})
	h, err := d.Start(context.Background(), task)
	if err != nil {
		assertErrorIs(t, err, ErrMemoryTooLow, "memory limit too low")
		return
	}
	st := waitFor(t, h)
	h.Destroy()
	t.Logf("started under %d MiB: %+v", minMemoryMB, st)
}

// TestJobSeesItsCgroupLimits: /sys/fs/cgroup shows the job its own cgroup
// (memory limit, pids limit, CPU quota), read-only.
func TestJobSeesItsCgroupLimits(t *testing.T) {
	d := newTestDriver(t, func(c *Config) { c.PidsLimit = 77 })
	spec := fsm.JobSpec{Resources: fsm.Resources{MemoryMB: 64, CPU: 500}}
	script := `cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/cpu*/cpu.cfs_quota_us
echo 1 > /sys/fs/cgroup/pids/pids.max && echo writable`
	want := "67108864\n77\n50000\n"
	if cgroups.IsCgroup2UnifiedMode() {
		script = `cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max /sys/fs/cgroup/cpu.max
echo 1 > /sys/fs/cgroup/pids.max && echo writable`
		want = "67108864\n77\n50000 100000\n"
	}
	spec.Command = sh(script)
	r := run(t, d, spec)
	if r.stdout != want {
		t.Fatalf("stdout %q, want %q (stderr %q)", r.stdout, want, r.stderr)
	}
	if !strings.Contains(r.stderr, "Read-only file system") {
		t.Fatalf("cgroupfs writable in the job? stderr %q", r.stderr)
	}
}
