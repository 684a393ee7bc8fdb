package exec

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// The test binary doubles as the foreman binary: the worker starts it as
// `<test binary> supervise --dir D`, and shim tests run `<test binary> shim -- …`
// (`launcher-nice`: priority_test.go).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "supervise":
			os.Exit(SuperviseMain(os.Args[2:]))
		case "shim":
			os.Exit(ShimMain(os.Args[2:]))
		case "launcher-nice":
			os.Exit(launcherNiceMain())
		}
	}
	os.Exit(m.Run())
}

// Generous timeouts for a loaded 2-core machine.
const (
	waitShort = 10 * time.Second
	waitLong  = 30 * time.Second
)

func testBinary(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeState is a hand-written stand-in for the FSM + leader: it holds the
// live attempts and applies reports the way fsm does (stale tokens rejected,
// terminal reports remove the attempt from the live set).
type fakeState struct {
	mu       sync.Mutex
	live     map[string]Assignment
	reports  []fsm.ReportAttempt
	watchers map[chan struct{}]bool
	contact  atomic.Bool
	stale    atomic.Bool  // InSync says no
	failNext atomic.Int32 // reports to fail with a transient error
	token    uint64
	// onReport, when set, sees every accepted report (under the lock; must not block).
	onReport func(fsm.ReportAttempt)
}

func newFakeState() *fakeState {
	s := &fakeState{live: map[string]Assignment{}, watchers: map[chan struct{}]bool{}}
	s.contact.Store(true)
	return s
}

func (s *fakeState) notifyLocked() {
	for ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *fakeState) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.watchers[ch] = true
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}
}

func (s *fakeState) LiveAttempts(node string) ([]Assignment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Assignment
	for _, a := range s.live {
		if a.Attempt.Node == node {
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *fakeState) Report(ctx context.Context, r fsm.ReportAttempt) error {
	if s.failNext.Load() > 0 {
		s.failNext.Add(-1)
		return fmt.Errorf("leader unreachable")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := TaskID(r.JobID, r.Attempt)
	a, ok := s.live[id]
	if !ok || a.Attempt.FencingToken != r.FencingToken {
		return fmt.Errorf("report %s: %w", id, fsm.ErrStaleToken)
	}
	s.reports = append(s.reports, r)
	if s.onReport != nil {
		s.onReport(r)
	}
	if r.State == fsm.ReportGPUMemoryOver {
		return nil // an event: the attempt stays as it is
	}
	if r.State == fsm.AttemptRunning {
		a.Attempt.State = fsm.AttemptRunning
		a.Attempt.StartedAt = r.StartedAt
		s.live[id] = a
	} else {
		delete(s.live, id)
	}
	s.notifyLocked()
	return nil
}

func (s *fakeState) InContactWithLeader() bool { return s.contact.Load() }
func (s *fakeState) InSync() bool              { return !s.stale.Load() }

// assign adds a new live attempt on node "n1" and returns its TaskID.
func (s *fakeState) assign(jobID string, spec fsm.JobSpec, mods ...func(*Assignment)) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token++
	a := Assignment{Spec: spec, Attempt: fsm.Attempt{
		JobID: jobID, Num: 1, Node: "n1", State: fsm.AttemptAssigned, FencingToken: 100 + s.token,
	}}
	for _, m := range mods {
		m(&a)
	}
	id := TaskID(jobID, 1)
	s.live[id] = a
	s.notifyLocked()
	return id
}

func (s *fakeState) edit(id string, fn func(a *Assignment)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.live[id]
	fn(&a)
	s.live[id] = a
	s.notifyLocked()
}

func (s *fakeState) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, id)
	s.notifyLocked()
}

// final returns the terminal report for job, if any.
func (s *fakeState) final(jobID string) (fsm.ReportAttempt, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reports {
		if r.JobID == jobID && r.State != fsm.AttemptRunning && r.State != fsm.ReportGPUMemoryOver {
			return r, true
		}
	}
	return fsm.ReportAttempt{}, false
}

func (s *fakeState) running(jobID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reports {
		if r.JobID == jobID && r.State == fsm.AttemptRunning {
			return true
		}
	}
	return false
}

// harness is one worker over a fake state, with a data dir short enough
// for unix socket paths.
type harness struct {
	t      testing.TB
	state  *fakeState
	cfg    WorkerConfig
	w      *Worker
	cancel context.CancelFunc
	done   chan struct{}
}

func dataDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "fx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func testConfig(t testing.TB, dir string) WorkerConfig {
	cfg := DefaultWorkerConfig()
	cfg.Node = "n1"
	cfg.DataDir = dir
	cfg.SupervisorPath = testBinary(t)
	cfg.LeaseDuration = 3 * time.Second
	cfg.RenewInterval = time.Second
	cfg.ReportBackoffMin = 10 * time.Millisecond
	cfg.ReportBackoffMax = 100 * time.Millisecond
	return cfg
}

func startWorker(t testing.TB, state *fakeState, cfg WorkerConfig) *harness {
	t.Helper()
	deps := WorkerDeps{Assignments: state, Reporter: state, LeaderContact: state}
	if _, bench := t.(*testing.B); bench {
		deps.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w, err := NewWorker(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, state: state, cfg: cfg, w: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		w.Run(ctx)
	}()
	t.Cleanup(h.stop)
	return h
}

// stop ends the worker (not its supervisors).
func (h *harness) stop() {
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(waitShort):
		h.t.Errorf("worker did not stop")
	}
}

// waitFinal waits for job's terminal report; t is the calling (sub)test.
func (h *harness) waitFinal(t testing.TB, jobID string, timeout time.Duration) fsm.ReportAttempt {
	t.Helper()
	var r fsm.ReportAttempt
	waitFor(t, timeout, "final report of "+jobID, func() bool {
		var ok bool
		r, ok = h.state.final(jobID)
		return ok
	})
	return r
}

func (h *harness) dir(jobID string) string { return h.w.AttemptDir(jobID, 1) }

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jobPID(t testing.TB, dir string) int {
	t.Helper()
	var pid int
	waitFor(t, waitShort, "job.pid", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, JobPIDFileName))
		if err != nil {
			return false
		}
		_, err = fmt.Sscan(string(b), &pid)
		return err == nil
	})
	return pid
}
