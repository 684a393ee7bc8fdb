package exec

import (
	"bytes"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// pids lists the idle supervisors' process IDs.
func (p *supervisorPool) pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for _, s := range p.idle {
		out = append(out, s.pid)
	}
	return out
}

func supervisorPID(t testing.TB, dir string) int {
	t.Helper()
	pid := 0
	waitFor(t, waitShort, "supervisor pid of "+dir, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, PIDFileName))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(string(b))
		return err == nil
	})
	return pid
}

// recycleConfig: one supervisor, kept for reuse.
func recycleConfig(t testing.TB) WorkerConfig {
	cfg := testConfig(t, dataDir(t))
	cfg.WarmSupervisors, cfg.MaxIdleSupervisors = 1, 1
	return cfg
}

func (h *harness) stdout(t testing.TB, job string) string {
	t.Helper()
	var out bytes.Buffer
	if err := h.w.StreamLog(context.Background(), job, 1, "stdout", false, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// fdTargets lists what pid's descriptors point at.
func fdTargets(t testing.TB, pid int) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out = append(out, e.Name()+"->"+target)
		}
	}
	return out
}

// TestRecycledSupervisorServesConsecutiveAttempts: one supervisor process
// serves two attempts in a row, and the second sees nothing of the first:
// not its environment, working directory, descriptors or log files.
func TestRecycledSupervisorServesConsecutiveAttempts(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, recycleConfig(t))
	// The first attempt changes what a job can change and leaves a
	// background process in its group (killed with the group).
	state.assign("first", fsm.JobSpec{Command: sh(`echo "secret=$SECRET"; cd /; umask 077; (sleep 60 &); echo first >&2`),
		Env: map[string]string{"SECRET": "s3cr3t"}})
	if r := h.waitFinal(t, "first", waitLong); r.State != fsm.AttemptSucceeded {
		t.Fatalf("first: %s %s", r.State, r.Reason)
	}
	pid1 := supervisorPID(t, h.dir("first"))
	waitFor(t, waitShort, "the supervisor back in the pool", func() bool {
		if !alive(pid1) {
			t.Fatalf("the supervisor exited after the first attempt; its log:\n%s", readFile(t, filepath.Join(h.dir("first"), SupervisorLog)))
		}
		pids := h.w.pool.pids()
		return len(pids) == 1 && pids[0] == pid1
	})
	idleFDs := fdTargets(t, pid1)
	if strings.Contains(strings.Join(idleFDs, " "), h.dir("first")) {
		t.Errorf("idle supervisor holds files of its attempt: %v", idleFDs)
	}

	state.assign("second", fsm.JobSpec{Command: sh(`echo "secret=$SECRET"; pwd; umask; ls -l /proc/$PPID/fd/ | sed 's/.*[0-9] \([0-9]* ->\)/\1/'; echo second >&2`)})
	if r := h.waitFinal(t, "second", waitLong); r.State != fsm.AttemptSucceeded {
		t.Fatalf("second: %s %s", r.State, r.Reason)
	}
	if pid2 := supervisorPID(t, h.dir("second")); pid2 != pid1 {
		t.Fatalf("second attempt ran under supervisor %d, first under %d: not reused; the first's log:\n%s",
			pid2, pid1, readFile(t, filepath.Join(h.dir("first"), SupervisorLog)))
	}
	waitFor(t, waitShort, "the supervisor back in the pool again", func() bool {
		pids := h.w.pool.pids()
		if !alive(pid1) {
			t.Fatalf("the supervisor exited after the second attempt; its log:\n%s", readFile(t, filepath.Join(h.dir("second"), SupervisorLog)))
		}
		return len(pids) == 1 && pids[0] == pid1
	})
	if after := fdTargets(t, pid1); strings.Join(after, " ") != strings.Join(idleFDs, " ") {
		t.Errorf("idle supervisor's descriptors differ after the second attempt:\nafter the first  %v\nafter the second %v", idleFDs, after)
	}
	if n := h.w.recycled.Load(); n < 1 {
		t.Errorf("recycled = %d, want >= 1", n)
	}
	out := h.stdout(t, "second")
	if !strings.HasPrefix(out, "secret=\n"+filepath.Join(h.dir("second"), WorkDirName)+"\n0022\n") {
		t.Errorf("second attempt's env/cwd/umask leaked from the first:\n%s", out)
	}
	if strings.Contains(out, h.dir("first")) {
		t.Errorf("the supervisor still holds files of the first attempt during the second:\n%s", out)
	}
	if !strings.Contains(out, h.dir("second")) {
		t.Errorf("the fd listing does not show the second attempt's files (test broken?):\n%s", out)
	}
	log1 := readFile(t, filepath.Join(h.dir("first"), SupervisorLog))
	log2 := readFile(t, filepath.Join(h.dir("second"), SupervisorLog))
	if !strings.Contains(log1, "task=first-1") || strings.Contains(log1, "second-1") {
		t.Errorf("first supervisor.log:\n%s", log1)
	}
	if !strings.Contains(log2, "task=second-1") || strings.Contains(log2, "first-1") {
		t.Errorf("second supervisor.log:\n%s", log2)
	}
	if tail := readFile(t, filepath.Join(h.dir("second"), StderrName)); tail != "second\n" {
		t.Errorf("second stderr.log %q", tail)
	}
}

// TestRecycledSupervisorFencesOnLeaseExpiry: the lease is per attempt. A
// reused supervisor that sat idle for longer than the lease starts the next
// attempt with a fresh lease (the job outlives several lease durations
// while renewed), and still fences it with SIGKILL when renewals stop.
func TestRecycledSupervisorFencesOnLeaseExpiry(t *testing.T) {
	state := newFakeState()
	cfg := recycleConfig(t)
	// 2 s, not 1 s: at a load of 60 (CI beside other work) 300 ms renewals
	// of a 1 s lease were late and the renewed job was fenced.
	cfg.LeaseDuration, cfg.RenewInterval = 2*time.Second, 600*time.Millisecond
	h := startWorker(t, state, cfg)
	state.assign("warmup", fsm.JobSpec{Command: []string{"true"}})
	h.waitFinal(t, "warmup", waitLong)
	pid1 := supervisorPID(t, h.dir("warmup"))
	waitFor(t, waitShort, "the supervisor back in the pool", func() bool {
		pids := h.w.pool.pids()
		return len(pids) == 1 && pids[0] == pid1
	})
	idleSince := time.Now()
	// Deliberately idle past the lease: an attempt must not inherit the
	// previous attempt's lease clock.
	time.Sleep(2 * cfg.LeaseDuration)
	if !alive(pid1) || time.Since(idleSince) < 2*cfg.LeaseDuration {
		t.Fatal("idle supervisor died")
	}

	job := "fence-reused"
	state.assign(job, fsm.JobSpec{Command: sh("trap '' TERM; sleep 60")})
	waitFor(t, waitShort, "running", func() bool { return state.running(job) })
	if pid := supervisorPID(t, h.dir(job)); pid != pid1 {
		t.Fatalf("attempt ran under supervisor %d, want the recycled %d", pid, pid1)
	}
	jpid := jobPID(t, h.dir(job))
	held := time.Now()
	for time.Since(held) < 3*cfg.LeaseDuration {
		if _, ok := state.final(job); ok || !alive(jpid) {
			t.Fatalf("job ended while the lease was being renewed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	lost := time.Now()
	state.contact.Store(false)
	waitFor(t, waitShort, "job process to die", func() bool { return !alive(jpid) })
	// Dead before the leader may declare it lost: L + its 3 s margin.
	if elapsed := time.Since(lost); elapsed > cfg.LeaseDuration+3*time.Second {
		t.Errorf("fenced after %v, want within the lease (%v) + the leader's 3 s margin", elapsed, cfg.LeaseDuration)
	}
	var res *Result
	waitFor(t, waitShort, "result.json", func() bool {
		var err error
		res, err = ReadResult(h.dir(job))
		return err == nil
	})
	if res.State != fsm.AttemptKilled || res.Reason != fsm.ReasonFenced || res.Signal != "SIGKILL" {
		t.Fatalf("result %s/%s %s, want killed/fenced SIGKILL", res.State, res.Reason, res.Signal)
	}
	state.contact.Store(true)
	if r := h.waitFinal(t, job, waitShort); r.Reason != fsm.ReasonFenced {
		t.Errorf("reported reason %q", r.Reason)
	}
	// And it serves again after a fenced attempt, once back in the pool (an
	// attempt assigned before that gets a fresh supervisor, which is right
	// but not what this checks).
	waitFor(t, waitShort, "the fenced supervisor back in the pool", func() bool {
		pids := h.w.pool.pids()
		return len(pids) == 1 && pids[0] == pid1
	})
	state.assign("after-fence", fsm.JobSpec{Command: []string{"true"}})
	if r := h.waitFinal(t, "after-fence", waitLong); r.State != fsm.AttemptSucceeded {
		t.Fatalf("after-fence: %s %s", r.State, r.Reason)
	}
	if pid := supervisorPID(t, h.dir("after-fence")); pid != pid1 {
		t.Errorf("after the fence, attempt ran under %d, want %d", pid, pid1)
	}
}

// TestRecycledSupervisorAcrossAgentRestart: a supervisor mid-attempt when
// its worker stops is re-adopted by the next worker, finishes the attempt
// and then exits (its worker is gone) instead of going idle; an idle one
// exits with its worker.
func TestRecycledSupervisorAcrossAgentRestart(t *testing.T) {
	state := newFakeState()
	cfg := recycleConfig(t)
	cfg.LeaseDuration, cfg.RenewInterval = 2*time.Second, 500*time.Millisecond
	h1 := startWorker(t, state, cfg)
	state.assign("warmup", fsm.JobSpec{Command: []string{"true"}})
	h1.waitFinal(t, "warmup", waitLong)
	pid1 := supervisorPID(t, h1.dir("warmup"))
	waitFor(t, waitShort, "the supervisor back in the pool", func() bool {
		pids := h1.w.pool.pids()
		return len(pids) == 1 && pids[0] == pid1
	})
	state.assign("busy", fsm.JobSpec{Command: sh("while [ ! -f go ]; do sleep 0.05; done; echo done")})
	waitFor(t, waitShort, "running", func() bool { return state.running("busy") })
	if pid := supervisorPID(t, h1.dir("busy")); pid != pid1 {
		t.Fatalf("busy ran under %d, want the recycled %d", pid, pid1)
	}
	waitFor(t, waitShort, "a new spare", func() bool { return h1.w.pool.len() == 1 })
	idle := h1.w.pool.pids()[0]
	h1.stop()
	waitFor(t, waitShort, "the idle supervisor to exit with its worker", func() bool { return !alive(idle) })
	if !alive(pid1) {
		t.Fatal("the busy supervisor exited with its worker")
	}

	cfg2 := cfg
	cfg2.WarmSupervisors = 0 // only recycled supervisors would enter the pool
	h2 := startWorker(t, state, cfg2)
	time.Sleep(2 * cfg.LeaseDuration) // deliberately idle: the new worker must renew
	if !alive(pid1) {
		t.Fatal("the adopted supervisor died: lease not renewed")
	}
	os.WriteFile(filepath.Join(h2.dir("busy"), WorkDirName, "go"), nil, 0o644)
	if r := h2.waitFinal(t, "busy", waitShort); r.State != fsm.AttemptSucceeded {
		t.Fatalf("busy: %s %s", r.State, r.Reason)
	}
	waitFor(t, waitShort, "the adopted supervisor to exit after its attempt", func() bool { return !alive(pid1) })
	if n := h2.w.pool.len(); n != 0 {
		t.Errorf("the new worker's pool holds %d supervisors (%v), want none", n, h2.w.pool.pids())
	}
}

// TestIdlePoolIsBounded: supervisors beyond MaxIdleSupervisors exit when
// their attempt is over.
func TestIdlePoolIsBounded(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.WarmSupervisors, cfg.MaxIdleSupervisors = 0, 2
	h := startWorker(t, state, cfg)
	const n = 5
	for i := range n {
		state.assign(fmt.Sprintf("burst-%d", i), fsm.JobSpec{Command: sh("sleep 0.5")})
	}
	var pids []int
	for i := range n {
		job := fmt.Sprintf("burst-%d", i)
		if r := h.waitFinal(t, job, waitLong); r.State != fsm.AttemptSucceeded {
			t.Fatalf("%s: %s %s", job, r.State, r.Reason)
		}
		pids = append(pids, supervisorPID(t, h.dir(job)))
	}
	waitFor(t, waitShort, "all but two supervisors to exit", func() bool {
		live := 0
		for _, p := range pids {
			if alive(p) {
				live++
			}
		}
		return live <= 2 && h.w.pool.len() == 2
	})
}

// TestProcessStateDiff: the cleanliness check a supervisor runs before it
// says idle notices a descriptor and a child left behind.
func TestProcessStateDiff(t *testing.T) {
	base, err := snapshotProcess()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := snapshotProcess()
	if err != nil {
		t.Fatal(err)
	}
	d := p.diff(base)
	opened := fmt.Sprintf("fd %d open (/dev/null)", f.Fd())
	if !strings.Contains(d, opened) || !slices.Contains(childPIDs(), strconv.Itoa(cmd.Process.Pid)) || !p.children {
		t.Errorf("diff %q misses the open /dev/null or the child %d", d, cmd.Process.Pid)
	}
	f.Close()
	cmd.Process.Kill()
	cmd.Wait()
	p, err = snapshotProcess()
	if err != nil {
		t.Fatal(err)
	}
	// Only this test's own fd and child are checked: other tests' goroutines
	// in this binary (a worker closing its sockets) may open or close fds
	// meanwhile.
	if d := p.diff(base); strings.Contains(d, opened) || slices.Contains(childPIDs(), strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("after cleanup: %q", d)
	}
}

// TestProcessStateDiffMountNamespace: a main thread left in another mount
// namespace (a locked goroutine that setns'd, as libcontainer's mount-source
// thread does, cannot take the main thread out of it) is a difference.
func TestProcessStateDiffMountNamespace(t *testing.T) {
	base, err := snapshotProcess()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base.mntns, "mnt:[") {
		t.Fatalf("mount namespace not recorded: %q", base.mntns)
	}
	p := *base
	p.mntns = "mnt:[1]"
	if d := p.diff(base); !strings.Contains(d, "main thread in mount namespace mnt:[1]") {
		t.Errorf("diff %q misses the main thread's mount namespace", d)
	}
}

// BenchmarkSnapshotProcess is the cleanliness check's cost per attempt.
func BenchmarkSnapshotProcess(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := snapshotProcess(); err != nil {
			b.Fatal(err)
		}
	}
}
