package exec

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestSpareSupervisorRunsAttempt: with spares ready, an attempt is served by
// one of them (its supervisor is a `--standby` process), runs normally and
// logs into its own supervisor.log.
func TestSpareSupervisorRunsAttempt(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.WarmSupervisors = 1
	h := startWorker(t, state, cfg)
	waitFor(t, waitShort, "a spare", func() bool { return h.w.pool.len() == 1 })
	state.assign("warm", fsm.JobSpec{Command: sh(`sleep 0.3; echo hi`)})
	pid := 0
	waitFor(t, waitShort, "supervisor pid", func() bool {
		b, err := os.ReadFile(filepath.Join(h.dir("warm"), PIDFileName))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(string(b))
		return err == nil
	})
	if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err != nil || !strings.Contains(string(cmdline), "--standby") {
		t.Errorf("supervisor %d cmdline %q (err %v): not a spare", pid, cmdline, err)
	}
	if r := h.waitFinal(t, "warm", waitLong); r.State != fsm.AttemptSucceeded {
		t.Fatalf("warm attempt: %s %s", r.State, r.Reason)
	}
	if n := h.w.sparesUsed.Load(); n != 1 {
		t.Errorf("spares used %d, want 1", n)
	}
	if log := readFile(t, filepath.Join(h.dir("warm"), SupervisorLog)); !strings.Contains(log, "attempt finished") {
		t.Errorf("supervisor.log of the spare lacks its lines: %q", log)
	}
	waitFor(t, waitShort, "a spare ready again", func() bool { return h.w.pool.len() >= 1 })
}

// TestSparesExitWithWorker: spares hold no job; when the worker stops they
// read EOF and exit, so a dead agent leaves no idle processes behind.
func TestSparesExitWithWorker(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.WarmSupervisors = 2
	h := startWorker(t, state, cfg)
	waitFor(t, waitShort, "two spares", func() bool { return h.w.pool.len() == 2 })
	pids := h.w.pool.pids()
	h.stop()
	for _, pid := range pids {
		waitFor(t, waitShort, "spare "+strconv.Itoa(pid)+" to exit", func() bool { return !alive(pid) })
	}
}

// TestDeadSpareFallsBackToColdStart: a spare that died idle is skipped and
// the attempt still starts (cold, or on a spare started since).
func TestDeadSpareFallsBackToColdStart(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.WarmSupervisors = 1
	h := startWorker(t, state, cfg)
	waitFor(t, waitShort, "a spare", func() bool { return h.w.pool.len() == 1 })
	s := h.w.pool.take()
	if err := syscall.Kill(s.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitShort, "the spare to die", func() bool { return !alive(s.pid) })
	h.w.pool.put(s, false)
	state.assign("after-dead-spare", fsm.JobSpec{Command: []string{"true"}})
	if r := h.waitFinal(t, "after-dead-spare", waitLong); r.State != fsm.AttemptSucceeded {
		t.Fatalf("attempt after a dead spare: %s %s", r.State, r.Reason)
	}
}
