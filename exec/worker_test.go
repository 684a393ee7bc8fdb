package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestWorkerRunsJobs(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))
	big := strings.Repeat("x", 10000)
	tests := []struct {
		name       string
		spec       fsm.JobSpec
		state      fsm.AttemptState
		exit       int // -1 = no exit code
		reason     string
		stdout     string
		stderrTail string // suffix of the stderr tail
	}{
		{name: "echo", spec: fsm.JobSpec{Command: []string{"echo", "hello"}}, state: fsm.AttemptSucceeded, stdout: "hello\n"},
		{name: "exit-code", spec: fsm.JobSpec{Command: sh("echo oops >&2; exit 3")}, state: fsm.AttemptFailed, exit: 3, reason: "exit code 3", stderrTail: "oops\n"},
		{name: "missing-command", spec: fsm.JobSpec{Command: []string{"no-such-cmd-xyz"}}, state: fsm.AttemptFailed, exit: -1, reason: `command "no-such-cmd-xyz" not found`},
		{name: "env", spec: fsm.JobSpec{Command: sh(`echo "$FOREMAN_JOB_ID $FOREMAN_ATTEMPT $FOREMAN_NODE $GREETING"`), Env: map[string]string{"GREETING": "hi"}},
			state: fsm.AttemptSucceeded, stdout: "job-env 1 n1 hi\n"},
		{name: "workdir", spec: fsm.JobSpec{Command: sh("pwd")}, state: fsm.AttemptSucceeded, stdout: "<dir>/task\n"},
		{name: "stderr-tail", spec: fsm.JobSpec{Command: sh("printf '" + big + "' >&2; echo END >&2; exit 1")}, state: fsm.AttemptFailed, exit: 1, stderrTail: "xxxEND\n"},
		{name: "signalled", spec: fsm.JobSpec{Command: sh("kill -9 $$")}, state: fsm.AttemptFailed, exit: -1, reason: "killed by SIGKILL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := "job-" + tc.name
			state.assign(job, tc.spec)
			r := h.waitFinal(t, job, waitShort)
			if r.State != tc.state {
				t.Fatalf("state = %s (%s), want %s", r.State, r.Reason, tc.state)
			}
			if tc.exit >= 0 && (r.ExitCode == nil || *r.ExitCode != tc.exit) {
				t.Errorf("exit code = %v, want %d", r.ExitCode, tc.exit)
			}
			if tc.exit < 0 && r.ExitCode != nil {
				t.Errorf("exit code = %d, want none", *r.ExitCode)
			}
			if !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("reason = %q, want it to contain %q", r.Reason, tc.reason)
			}
			if r.FencingToken == 0 || r.Node != "n1" {
				t.Errorf("report token/node = %d/%q", r.FencingToken, r.Node)
			}
			if len(r.StderrTail) > fsm.StderrTailMax || !strings.HasSuffix(r.StderrTail, tc.stderrTail) {
				t.Errorf("stderr tail (%d bytes) = ...%q, want suffix %q", len(r.StderrTail), last(r.StderrTail, 40), tc.stderrTail)
			}
			if tc.stdout != "" {
				want := strings.ReplaceAll(tc.stdout, "<dir>", h.dir(job))
				var out bytes.Buffer
				if err := h.w.StreamLog(context.Background(), job, 1, "stdout", false, &out); err != nil {
					t.Fatal(err)
				}
				if out.String() != want {
					t.Errorf("stdout = %q, want %q", out.String(), want)
				}
			}
			if r.State == fsm.AttemptSucceeded && (r.StartedAt.IsZero() || r.FinishedAt.Before(r.StartedAt)) {
				t.Errorf("times: started %v finished %v", r.StartedAt, r.FinishedAt)
			}
			waitFor(t, waitShort, "reported marker and workdir removal", func() bool {
				return exists(filepath.Join(h.dir(job), ReportedName)) && !exists(filepath.Join(h.dir(job), WorkDirName))
			})
		})
	}
}

func last(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestWorkerKills(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))
	tests := []struct {
		name    string
		spec    fsm.JobSpec
		cancel  string // set CancelRequested once running
		reason  string
		signal  string
		minTime time.Duration // from start to finish
	}{
		{name: "timeout-sigterm", spec: fsm.JobSpec{Command: []string{"sleep", "60"}, Timeout: fsm.Duration(300 * time.Millisecond)},
			reason: fsm.ReasonTimeout, signal: "SIGTERM", minTime: 300 * time.Millisecond},
		// TERM is ignored (inherited by sleep), so only the SIGKILL after kill_timeout ends it.
		{name: "timeout-sigkill", spec: fsm.JobSpec{Command: sh("trap '' TERM; sleep 60"), Timeout: fsm.Duration(300 * time.Millisecond), KillTimeout: fsm.Duration(700 * time.Millisecond)},
			reason: fsm.ReasonTimeout, signal: "SIGKILL", minTime: time.Second},
		{name: "custom-kill-signal", spec: fsm.JobSpec{Command: []string{"sleep", "60"}, Timeout: fsm.Duration(200 * time.Millisecond), KillSignal: "INT"},
			reason: fsm.ReasonTimeout, signal: "SIGINT"},
		{name: "cancel", spec: fsm.JobSpec{Command: []string{"sleep", "60"}}, cancel: fsm.ReasonCancelled, reason: fsm.ReasonCancelled, signal: "SIGTERM"},
		{name: "drain", spec: fsm.JobSpec{Command: []string{"sleep", "60"}}, cancel: fsm.ReasonDrained, reason: fsm.ReasonDrained, signal: "SIGTERM"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := "kill-" + tc.name
			id := state.assign(job, tc.spec)
			waitFor(t, waitShort, "running report", func() bool { return state.running(job) })
			pid := jobPID(t, h.dir(job))
			if tc.cancel != "" {
				state.edit(id, func(a *Assignment) { a.Attempt.CancelRequested = tc.cancel })
			}
			r := h.waitFinal(t, job, waitShort)
			if r.State != fsm.AttemptKilled || r.Reason != tc.reason || r.Signal != tc.signal {
				t.Fatalf("got %s/%s signal %q, want killed/%s signal %q", r.State, r.Reason, r.Signal, tc.reason, tc.signal)
			}
			if d := r.FinishedAt.Sub(r.StartedAt); d < tc.minTime {
				t.Errorf("ran %v, want at least %v", d, tc.minTime)
			}
			if alive(pid) {
				t.Errorf("job process %d still alive", pid)
			}
		})
	}
}

// The supervisor fences the job by itself when the agent stops renewing.
func TestLeaseExpiryFencesJob(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.LeaseDuration, cfg.RenewInterval = time.Second, 300*time.Millisecond
	h := startWorker(t, state, cfg)
	job := "fence"
	state.assign(job, fsm.JobSpec{Command: sh("trap '' TERM; sleep 60")})
	waitFor(t, waitShort, "running", func() bool { return state.running(job) })
	pid := jobPID(t, h.dir(job))
	// Renewals are working: the job outlives several lease durations.
	held := time.Now()
	for time.Since(held) < 3*cfg.LeaseDuration {
		if _, ok := state.final(job); ok || !alive(pid) {
			t.Fatalf("job ended while the lease was being renewed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	lost := time.Now()
	state.contact.Store(false)
	waitFor(t, waitShort, "job process to die", func() bool { return !alive(pid) })
	elapsed := time.Since(lost)
	// The promise (invariant 2): the copy is dead before the leader may
	// declare it lost, L + its safety margin (sched: 3 s) after contact.
	// Past that is a broken fence, not noise; how close to L it dies is
	// logged.
	t.Logf("fenced %v after renewals stopped (lease %v)", elapsed, cfg.LeaseDuration)
	if elapsed > cfg.LeaseDuration+3*time.Second {
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
	t.Logf("contact lost → job dead in %v (lease %v)", elapsed, cfg.LeaseDuration)
	// Once contact is back, the (current) attempt's fenced result is reported.
	state.contact.Store(true)
	r := h.waitFinal(t, job, waitShort)
	if r.Reason != fsm.ReasonFenced {
		t.Errorf("reported reason %q", r.Reason)
	}
}

// An attempt that leaves the live set while running (the leader replaced
// it) is killed and not reported.
func TestVanishedAttemptKilledNotReported(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))
	job := "vanish"
	id := state.assign(job, fsm.JobSpec{Command: []string{"sleep", "60"}})
	waitFor(t, waitShort, "running", func() bool { return state.running(job) })
	pid := jobPID(t, h.dir(job))
	state.drop(id)
	waitFor(t, waitShort, "job to die", func() bool { return !alive(pid) })
	waitFor(t, waitShort, "reported marker", func() bool { return exists(filepath.Join(h.dir(job), ReportedName)) })
	res, err := ReadResult(h.dir(job))
	if err != nil || res.Reason != reasonSuperseded {
		t.Fatalf("result %+v, %v; want reason %s", res, err, reasonSuperseded)
	}
	if r, ok := state.final(job); ok {
		t.Fatalf("superseded attempt was reported: %+v", r)
	}
	if res.Signal != "SIGKILL" {
		t.Errorf("superseded job got %q, want an immediate SIGKILL", res.Signal)
	}
}

// Reports are retried until the leader acknowledges them.
func TestReportRetried(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))
	state.failNext.Store(4)
	state.assign("retry", fsm.JobSpec{Command: []string{"true"}})
	if r := h.waitFinal(t, "retry", waitShort); r.State != fsm.AttemptSucceeded {
		t.Fatalf("state %s", r.State)
	}
}

// A new worker re-adopts a running supervisor (renewing its lease in time)
// and reports the result; and reports a result that was written while no
// worker ran.
func TestAgentRestartReadopts(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.LeaseDuration, cfg.RenewInterval = 2*time.Second, 500*time.Millisecond
	h1 := startWorker(t, state, cfg)
	wait := sh("while [ ! -f go ]; do sleep 0.05; done; echo finished")
	state.assign("adopt-running", fsm.JobSpec{Command: wait})
	state.assign("adopt-finished", fsm.JobSpec{Command: wait})
	for _, j := range []string{"adopt-running", "adopt-finished"} {
		waitFor(t, waitShort, "running "+j, func() bool { return state.running(j) })
	}
	pid := jobPID(t, h1.dir("adopt-running"))
	h1.stop()

	// While no agent runs: one job finishes.
	os.WriteFile(filepath.Join(h1.dir("adopt-finished"), WorkDirName, "go"), nil, 0o644)
	waitFor(t, waitShort, "result.json while agent down", func() bool {
		return exists(filepath.Join(h1.dir("adopt-finished"), ResultFileName))
	})

	h2 := startWorker(t, state, cfg)
	if r := h2.waitFinal(t, "adopt-finished", waitShort); r.State != fsm.AttemptSucceeded {
		t.Fatalf("adopt-finished: %s %s", r.State, r.Reason)
	}
	// Survives well past the lease: the new worker renews it.
	time.Sleep(2 * cfg.LeaseDuration) // deliberately idle: proving a negative over time
	if !alive(pid) {
		t.Fatalf("adopted job died: lease not renewed by the new worker")
	}
	os.WriteFile(filepath.Join(h2.dir("adopt-running"), WorkDirName, "go"), nil, 0o644)
	r := h2.waitFinal(t, "adopt-running", waitShort)
	if r.State != fsm.AttemptSucceeded {
		t.Fatalf("adopt-running: %s %s", r.State, r.Reason)
	}
	var out bytes.Buffer
	h2.w.StreamLog(context.Background(), "adopt-running", 1, "stdout", false, &out)
	if out.String() != "finished\n" {
		t.Errorf("stdout %q", out.String())
	}
}

// RenewLeases renews every followed attempt's lease at once (the agent's
// last act in contact before a restart), and none out of contact.
func TestRenewLeasesRenewsEveryFollowedAttempt(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))
	for _, id := range []string{"a", "b"} {
		state.assign(id, fsm.JobSpec{Command: []string{"sleep", "60"}})
	}
	waitFor(t, waitShort, "both running", func() bool { return state.running("a") && state.running("b") })
	waitFor(t, waitShort, "both followed", func() bool { return h.w.RenewLeases() == 2 })
	state.contact.Store(false)
	if n := h.w.RenewLeases(); n != 0 {
		t.Errorf("out of contact, RenewLeases renewed %d leases, want 0", n)
	}
}

// A new worker that adopts a running attempt before it is in contact with
// the leader renews the lease as soon as contact is back, not a renew tick
// later: an agent restarted during an election otherwise lost up to a tick
// of the lease per skipped renewal and the adopted job was fenced
// (TestSystemRollingRestart saw that under load).
func TestAdoptRenewsOnceContactReturns(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.LeaseDuration, cfg.RenewInterval = 2*time.Second, time.Second
	h1 := startWorker(t, state, cfg)
	state.assign("adopted", fsm.JobSpec{Command: []string{"sleep", "60"}})
	waitFor(t, waitShort, "running", func() bool { return state.running("adopted") })
	pid := jobPID(t, h1.dir("adopted"))
	state.contact.Store(false) // no last renewal from the stopping worker either
	h1.stop()
	stopped := time.Now()

	startWorker(t, state, cfg)
	// Contact returns after 1.2 s: between the new worker's first tick
	// (skipped) and its second, which comes after the lease has run out.
	time.Sleep(1200*time.Millisecond - time.Since(stopped)) // deliberately: a contact gap of known length
	state.contact.Store(true)
	time.Sleep(cfg.LeaseDuration + 500*time.Millisecond) // proving a negative over time
	if !alive(pid) {
		t.Fatalf("adopted job was fenced: the lease was not renewed when contact returned")
	}
	if r, ok := state.final("adopted"); ok {
		t.Fatalf("adopted job reported final: %+v", r)
	}
}

// A supervisor killed with SIGKILL takes its job with it and the worker
// reports the attempt failed.
func TestSupervisorCrash(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))
	job := "crash"
	state.assign(job, fsm.JobSpec{Command: []string{"sleep", "60"}})
	waitFor(t, waitShort, "running", func() bool { return state.running(job) })
	pid := jobPID(t, h.dir(job))
	var spid int
	fmt.Sscan(readFile(t, filepath.Join(h.dir(job), PIDFileName)), &spid)
	if err := syscall.Kill(spid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := h.waitFinal(t, job, waitShort)
	if r.State != fsm.AttemptFailed || !strings.Contains(r.Reason, "supervisor") {
		t.Fatalf("got %s %q", r.State, r.Reason)
	}
	waitFor(t, waitShort, "job to die with its supervisor", func() bool { return !alive(pid) })
}

type cleanerDriver struct {
	ProcessDriver
	got chan map[string]bool
}

func (*cleanerDriver) Name() string { return "test-cleaner" }

// CleanupOrphans never blocks: the driver stays registered (the registry is
// process-wide) and later workers call it too.
func (d *cleanerDriver) CleanupOrphans(live map[string]bool) error {
	select {
	case d.got <- live:
	default:
	}
	return nil
}

// Start-up cleanup: reported dirs past retention and dirs without a task
// file go; the driver's cleanup hook learns the live supervisors.
func TestStartupCleanup(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.KeepFinished = time.Hour
	cleaner := &cleanerDriver{got: make(chan map[string]bool, 4)}
	RegisterDriver(cleaner)
	attempts := filepath.Join(cfg.DataDir, "attempts")
	mk := func(name string, files ...string) string {
		d := filepath.Join(attempts, name)
		os.MkdirAll(d, 0o700)
		for _, f := range files {
			os.WriteFile(filepath.Join(d, f), nil, 0o644)
		}
		return d
	}
	old := mk("old-1", ReportedName)
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(filepath.Join(old, ReportedName), past, past)
	recent := mk("recent-1", ReportedName)
	junk := mk("junk-1")

	h := startWorker(t, state, cfg)
	var live map[string]bool
	select {
	case live = <-cleaner.got:
	case <-time.After(waitShort):
		t.Fatal("CleanupOrphans not called")
	}
	if len(live) != 0 {
		t.Errorf("live = %v, want none", live)
	}
	waitFor(t, waitShort, "cleanup", func() bool { return !exists(old) && !exists(junk) })
	if !exists(recent) {
		t.Errorf("recently reported attempt removed before retention")
	}
	_ = h
}

func TestStreamLogErrors(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))
	var out bytes.Buffer
	if err := h.w.StreamLog(context.Background(), "nope", 1, "stdout", false, &out); !errors.Is(err, ErrNoSuchAttempt) {
		t.Errorf("missing attempt: err = %v, want ErrNoSuchAttempt", err)
	}
	if err := h.w.StreamLog(context.Background(), "nope", 1, "stdin", false, &out); !errors.Is(err, ErrBadStream) {
		t.Errorf("bad stream: err = %v, want ErrBadStream", err)
	}
}

// Following a log streams output as it is written and ends after the last
// bytes once the attempt finished; rotation is followed across files.
func TestStreamLogFollowAndRotation(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.LogMaxBytes = 4096
	h := startWorker(t, state, cfg)
	// 60 lines of 100 bytes (6000 bytes) over ~1.2 s: one rotation at 4096.
	script := `i=0; while [ $i -lt 60 ]; do printf '%099d\n' $i; i=$((i+1)); [ $((i % 5)) -eq 0 ] && sleep 0.1; done`
	state.assign("follow", fsm.JobSpec{Command: sh(script)})
	waitFor(t, waitShort, "attempt dir", func() bool { return exists(filepath.Join(h.dir("follow"), TaskFileName)) })
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := h.w.StreamLog(ctx, "follow", 1, "stdout", true, &out); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&want, "%099d\n", i)
	}
	if out.String() != want.String() {
		t.Errorf("followed %d bytes, want %d (first diff near %d)", out.Len(), want.Len(), firstDiff(out.String(), want.String()))
	}
	// On disk: the cap holds, one rotated copy.
	cur, _ := os.Stat(filepath.Join(h.dir("follow"), StdoutName))
	rot, _ := os.Stat(filepath.Join(h.dir("follow"), StdoutName+".1"))
	if cur == nil || rot == nil || cur.Size() > 4096 || rot.Size() != 4096 {
		t.Fatalf("files: current %v rotated %v", cur, rot)
	}
	// Without follow, the two files together give the end of the output.
	out.Reset()
	h.w.StreamLog(context.Background(), "follow", 1, "stdout", false, &out)
	if !strings.HasSuffix(want.String(), out.String()) || out.Len() != 6000 {
		t.Errorf("non-follow read %d bytes, not the suffix of the output", out.Len())
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// With the agent gone for good (no worker renews), the supervisor fences
// the job on its own within the lease.
func TestAgentDeathFences(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.LeaseDuration, cfg.RenewInterval = time.Second, 300*time.Millisecond
	h := startWorker(t, state, cfg)
	job := "orphaned"
	state.assign(job, fsm.JobSpec{Command: []string{"sleep", "60"}})
	waitFor(t, waitShort, "running", func() bool { return state.running(job) })
	pid := jobPID(t, h.dir(job))
	h.stop()
	stopped := time.Now()
	waitFor(t, waitShort, "job to be fenced", func() bool { return !alive(pid) })
	if d := time.Since(stopped); d > cfg.LeaseDuration+time.Second {
		t.Errorf("job died %v after the agent, lease is %v", d, cfg.LeaseDuration)
	}
	var res *Result
	waitFor(t, waitShort, "result.json", func() bool {
		var err error
		res, err = ReadResult(h.dir(job))
		return err == nil
	})
	if res.State != fsm.AttemptKilled || res.Reason != fsm.ReasonFenced {
		t.Fatalf("result %s/%s, want killed/fenced", res.State, res.Reason)
	}
}

// Many attempts start at once and run side by side.
func TestManyAttemptsInParallel(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))
	const n = 20
	t0 := time.Now()
	for i := 0; i < n; i++ {
		state.assign(fmt.Sprintf("par-%02d", i), fsm.JobSpec{Command: sh(`sleep 0.5; echo "$FOREMAN_JOB_ID"`)})
	}
	for i := 0; i < n; i++ {
		job := fmt.Sprintf("par-%02d", i)
		if r := h.waitFinal(t, job, waitLong); r.State != fsm.AttemptSucceeded {
			t.Fatalf("%s: %s %s", job, r.State, r.Reason)
		}
		var out bytes.Buffer
		h.w.StreamLog(context.Background(), job, 1, "stdout", false, &out)
		if out.String() != job+"\n" {
			t.Errorf("%s stdout %q", job, out.String())
		}
	}
	// Sequential would take n × 0.5 s = 10 s.
	if d := time.Since(t0); d > n*500*time.Millisecond/2 {
		t.Errorf("%d half-second jobs took %v: not run in parallel", n, d)
	}
}

// TestSupervisorDoneBeforeDial is the regression test for jepsen bug 1: a
// supervisor that finished (and removed its socket) before the worker could
// connect had its real result overwritten with "start supervisor: ..." and
// the job was run again.
func TestSupervisorDoneBeforeDial(t *testing.T) {
	cfg := testConfig(t, dataDir(t))
	script := filepath.Join(t.TempDir(), "quick-supervisor")
	// Stands in for a supervisor whose job ended at once: it writes the
	// result and removes its socket, as the real one does on exit.
	body := `#!/bin/sh
dir="$3"
printf '{"state":"succeeded","exit_code":0,"finished_at":"2026-01-01T00:00:00Z"}' > "$dir/result.json.tmp"
mv "$dir/result.json.tmp" "$dir/result.json"
rm -f "$dir/lease.sock"
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.SupervisorPath = script
	cfg.WarmSupervisors, cfg.MaxIdleSupervisors = 0, 0 // the script is no standby supervisor
	// Connect only once the supervisor is gone, as a slow agent would.
	afterSupervisorStart = func(dir string) {
		waitFor(t, waitShort, "supervisor to finish", func() bool {
			_, err := os.Stat(filepath.Join(dir, ResultFileName))
			_, serr := os.Stat(filepath.Join(dir, LeaseSockName))
			return err == nil && os.IsNotExist(serr)
		})
	}
	t.Cleanup(func() { afterSupervisorStart = func(string) {} })
	state := newFakeState()
	h := startWorker(t, state, cfg)
	state.assign("quick", fsm.JobSpec{Command: []string{"true"}})
	r := h.waitFinal(t, "quick", waitShort)
	if r.State != fsm.AttemptSucceeded {
		t.Fatalf("reported %s %q, want the supervisor's own result (succeeded)", r.State, r.Reason)
	}
}

// A restarted node's FSM may still list an attempt the leader has replaced
// (jepsen bug 2): nothing starts until the node is in sync, and an attempt
// the catch-up removes never starts at all.
func TestWorkerStartsNothingUntilInSync(t *testing.T) {
	state := newFakeState()
	state.stale.Store(true)
	cfg := testConfig(t, dataDir(t))
	w, err := NewWorker(cfg, WorkerDeps{Assignments: state, Reporter: state, LeaderContact: state})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); w.wg.Wait() }()
	w.ctx = ctx
	replaced := state.assign("job-replaced", fsm.JobSpec{Command: []string{"true"}})
	if !w.reconcile(ctx) {
		t.Fatal("reconcile out of sync did not defer the assigned attempt")
	}
	if got := w.Running(); len(got) != 0 {
		t.Fatalf("out of sync, the worker started %v", got)
	}
	if _, err := os.Stat(w.AttemptDir("job-replaced", 1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("attempt dir made while out of sync: %v", err)
	}
	// The catch-up applies the leader's verdict: the attempt was lost.
	state.mu.Lock()
	delete(state.live, replaced)
	state.mu.Unlock()
	kept := state.assign("job-kept", fsm.JobSpec{Command: []string{"true"}})
	state.stale.Store(false)
	if w.reconcile(ctx) {
		t.Fatal("reconcile in sync deferred work")
	}
	waitFor(t, waitShort, "final report of "+kept, func() bool {
		_, ok := state.final("job-kept")
		return ok
	})
	if r, ok := state.final("job-replaced"); ok {
		t.Fatalf("the replaced attempt was reported: %+v", r)
	}
	if _, err := os.Stat(w.AttemptDir("job-replaced", 1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the replaced attempt started after the catch-up: %v", err)
	}
}

// After a snapshot restore the state may list an attempt whose number this
// node already used under another fencing token: a finished one's dir is
// replaced, a running one is stopped, and the live attempt runs.
func TestAttemptNumberReusedWithNewToken(t *testing.T) {
	state := newFakeState()
	h := startWorker(t, state, testConfig(t, dataDir(t)))

	state.assign("done-before", fsm.JobSpec{Command: []string{"true"}})
	first := h.waitFinal(t, "done-before", waitShort)
	state.mu.Lock()
	state.reports = nil
	state.mu.Unlock()
	state.assign("done-before", fsm.JobSpec{Command: []string{"true"}})
	if again := h.waitFinal(t, "done-before", waitShort+2*reportedLag); again.FencingToken == first.FencingToken || again.State != fsm.AttemptSucceeded {
		t.Fatalf("second attempt reported %+v (first %+v)", again, first)
	}

	id := state.assign("running-before", fsm.JobSpec{Command: []string{"sleep", "60"}})
	waitFor(t, waitShort, "running", func() bool { return state.running("running-before") })
	pid := jobPID(t, h.dir("running-before"))
	state.edit(id, func(a *Assignment) {
		a.Attempt.FencingToken += 1000
		a.Attempt.State = fsm.AttemptAssigned
		a.Spec = fsm.JobSpec{Command: []string{"true"}}
	})
	waitFor(t, waitShort, "the superseded copy to die", func() bool { return !alive(pid) })
	if r := h.waitFinal(t, "running-before", waitShort+2*reportedLag); r.State != fsm.AttemptSucceeded || r.FencingToken < 1000 {
		t.Fatalf("live attempt reported %+v", r)
	}
}
