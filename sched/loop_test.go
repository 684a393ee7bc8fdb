package sched

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// pollTimeout is generous for a slow, shared 2-core CI machine.
const pollTimeout = 20 * time.Second

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type loopEnv struct {
	t   testing.TB
	f   *fsm.FSM
	clk *fakeClock
	r   *fakeRaft
}

func newLoopEnv(t testing.TB) *loopEnv {
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	clk := newFakeClock(t0)
	e := &loopEnv{t: t, f: f, clk: clk,
		r: &fakeRaft{t: t, f: f, leaderSince: t0.Add(-time.Hour), heard: map[string]time.Time{}}}
	// Accounting on, as in a cluster past its first leader: a loop that
	// starts commits start_usage otherwise, and that commit's signal can
	// land in the window a test measures (TestEnsureUsage covers it).
	e.apply(fsm.CmdStartUsage, &fsm.StartUsage{})
	return e
}

// apply commits a command stamped with the fake clock's time.
func (e *loopEnv) apply(typ fsm.CommandType, payload any) *fsm.Result {
	e.t.Helper()
	cmd, err := fsm.NewCommand(typ, e.clk.Now(), payload)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.r.Apply(context.Background(), cmd)
	if err != nil || res.Err != nil {
		e.t.Fatalf("apply %s: %v %v", typ, err, res.Err)
	}
	return res
}

// start runs a scheduler until the returned stop function is called.
func (e *loopEnv) start(cfg Config) (*Scheduler, func()) {
	e.t.Helper()
	return e.startWith(cfg, Deps{Raft: e.r, State: e.f, Clock: e.clk})
}

// startWith is start with other dependencies (a gated raft, a system clock).
func (e *loopEnv) startWith(cfg Config, deps Deps) (*Scheduler, func()) {
	e.t.Helper()
	s, err := New(cfg, deps, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return s, func() {
		cancel()
		<-done
	}
}

func (e *loopEnv) job(id string) *fsm.Job {
	e.t.Helper()
	var j *fsm.Job
	if err := e.f.View(func(tx *fsm.Tx) error {
		var err error
		j, err = tx.Job(id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return j
}

func (e *loopEnv) attempt(id string, n int) *fsm.Attempt {
	e.t.Helper()
	var a *fsm.Attempt
	if err := e.f.View(func(tx *fsm.Tx) error {
		var err error
		a, err = tx.Attempt(id, n)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// waitPlaced waits until the job's attempt n exists and returns it.
func (e *loopEnv) waitPlaced(id string, n int) *fsm.Attempt {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("%s attempt %d placed", id, n), func() bool {
		j := e.job(id)
		return j.Current == n && j.State == fsm.JobRunning
	})
	return e.attempt(id, n)
}

func (e *loopEnv) fail(a *fsm.Attempt) {
	e.t.Helper()
	code := 1
	e.apply(fsm.CmdReport, &fsm.ReportAttempt{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken,
		Node: a.Node, State: fsm.AttemptFailed, ExitCode: &code})
}

func loopConfig() Config {
	c := DefaultConfig()
	c.Coalesce = 0 // the fake clock would have to be advanced for it
	return c
}

// A failed attempt is retried once, exactly at NextRunAt, and a failover in
// the middle of a backoff neither loses nor doubles the retry.
func TestLoopRetryAndFailover(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)})
	spec := fsm.JobSpec{Command: []string{"false"}, Priority: 50, MaxAttempts: 3,
		Resources: fsm.Resources{CPU: 100, MemoryMB: 64},
		Backoff:   fsm.Backoff{Initial: fsm.Duration(30 * time.Second), Multiplier: 1, Max: fsm.Duration(30 * time.Second)}}
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "job1", Spec: spec}}})

	_, stop := e.start(loopConfig())
	a1 := e.waitPlaced("job1", 1)
	if a1.Node != "n1" {
		t.Fatalf("placed on %q", a1.Node)
	}

	e.fail(a1)
	j := e.job("job1")
	if j.State != fsm.JobRetrying || !j.NextRunAt.After(e.clk.Now()) {
		t.Fatalf("after failure: %s, next run %v", j.State, j.NextRunAt)
	}
	due := j.NextRunAt
	e.clk.Advance(due.Sub(e.clk.Now()) - time.Millisecond)
	e.clk.Advance(time.Millisecond)
	a2 := e.waitPlaced("job1", 2)
	if !a2.AssignedAt.Equal(due) {
		t.Fatalf("retry assigned at %v, want exactly NextRunAt %v", a2.AssignedAt, due)
	}

	// Second failure, then the leader goes away mid-backoff.
	e.fail(a2)
	due = e.job("job1").NextRunAt
	e.clk.Advance(due.Sub(e.clk.Now()) / 2)
	stop()
	if got := e.job("job1"); got.State != fsm.JobRetrying || got.Attempts != 2 {
		t.Fatalf("before failover: %s with %d attempts", got.State, got.Attempts)
	}

	// A new leader: nothing survives in memory; it rebuilds the timer.
	e.r.mu.Lock()
	e.r.leaderSince = e.clk.Now()
	e.r.mu.Unlock()
	_, stop = e.start(loopConfig())
	defer stop()
	e.clk.Advance(due.Sub(e.clk.Now()))
	a3 := e.waitPlaced("job1", 3)
	if !a3.AssignedAt.Equal(due) {
		t.Fatalf("retry after failover assigned at %v, want %v", a3.AssignedAt, due)
	}
	e.apply(fsm.CmdReport, &fsm.ReportAttempt{JobID: "job1", Attempt: 3, FencingToken: a3.FencingToken,
		Node: "n1", State: fsm.AttemptSucceeded, ExitCode: new(int)})
	e.clk.Advance(time.Hour) // timers fire (GC too); nothing more may happen to job1
	eventually(t, "GC after an hour", func() bool { return len(e.r.commands(fsm.CmdGC)) > 0 })
	if j := e.job("job1"); j.State != fsm.JobSucceeded || j.Attempts != 3 {
		t.Fatalf("end: %s after %d attempts, want succeeded after 3", j.State, j.Attempts)
	}
}

// A dead node's attempt is declared lost only after L + margin since the
// leader last heard from it, then re-placed elsewhere.
func TestLoopLostAfterLease(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)})
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "job1",
		Spec: fsm.JobSpec{Command: []string{"sleep", "1000"}, Priority: 50, MaxAttempts: 1, Resources: fsm.Resources{CPU: 100, MemoryMB: 64}}}}})
	cfg := loopConfig()
	_, stop := e.start(cfg)
	defer stop()
	a1 := e.waitPlaced("job1", 1)

	// n1 goes silent now and gossip declares it dead 5s later; n2 joins.
	e.r.mu.Lock()
	e.r.heard["n1"] = e.clk.Now()
	e.r.mu.Unlock()
	silent := e.clk.Now()
	e.clk.Advance(5 * time.Second)
	e.apply(fsm.CmdNodeState, &fsm.SetNodeState{Name: "n1", Gossip: fsm.NodeDead})
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n2", 4000, 4096)})
	lostAt := silent.Add(cfg.LeaseDuration + cfg.SafetyMargin)
	// The scheduler has seen n1 dead and waits for exactly lostAt; until
	// then the attempt stays.
	e.clk.waitTimer(t, lostAt)
	e.clk.Advance(lostAt.Sub(e.clk.Now()) - time.Millisecond)
	if a := e.attempt("job1", 1); a.State != fsm.AttemptRunning && a.State != fsm.AttemptAssigned {
		t.Fatalf("attempt %s before the lease ran out", a.State)
	}
	e.clk.Advance(time.Millisecond)
	a2 := e.waitPlaced("job1", 2)
	if a2.Node != "n2" || !a2.AssignedAt.Equal(lostAt) {
		t.Fatalf("replacement on %s at %v, want n2 at %v", a2.Node, a2.AssignedAt, lostAt)
	}
	if a := e.attempt("job1", 1); a.State != fsm.AttemptLost || a.Counted || a.FencingToken != a1.FencingToken {
		t.Fatalf("first attempt %+v, want lost and not counted", a)
	}
}

// burst submits n jobs to a running scheduler as fast as the fake raft
// applies them and waits until all are placed; it returns how long the
// submits took and the scheduler's plan count and planning time.
func burst(tb testing.TB, n int) (took time.Duration, plans int64, busy time.Duration) {
	tb.Helper()
	e := newLoopEnv(tb)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 1_000_000, 1_000_000)})
	cfg := DefaultConfig()
	cfg.Coalesce = time.Second // the window is then sized by the plans' cost alone
	s, stop := e.startWith(cfg, Deps{Raft: e.r, State: e.f, Clock: SystemClock()})
	defer stop()
	start := time.Now()
	for i := range n {
		e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: fmt.Sprintf("j%05d", i),
			Spec: fsm.JobSpec{Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 1, MemoryMB: 1}}}}})
	}
	took = time.Since(start)
	eventually(tb, "all placed", func() bool {
		var running int
		_ = e.f.View(func(tx *fsm.Tx) error { running = tx.CountJobsInState(fsm.JobRunning); return nil })
		return running == n
	})
	return took, s.Plans(), s.PlanTime()
}

// A burst of submits is coalesced into fewer plans than submits, and all
// of it is placed. How much of the burst went to planning (about
// 1/coalesceFactor) depends on how the machine's cores were shared: it is
// BenchmarkCoalesceBurst's figure, logged here.
func TestLoopCoalescesBursts(t *testing.T) {
	const n = 3000
	took, plans, busy := burst(t, n)
	t.Logf("%d submits in %v gave %d plans taking %v (about %v expected)", n, took, plans, busy, took/coalesceFactor)
	if plans >= n {
		t.Fatalf("%d plans for %d submits: nothing coalesced", plans, n)
	}
}

// BenchmarkCoalesceBurst: plans per 1,000 submitted jobs and the share of
// a 3,000-submit burst spent planning (coalescing aims at about
// 1/coalesceFactor of it).
func BenchmarkCoalesceBurst(b *testing.B) {
	const n = 3000
	var plans int64
	var took, busy time.Duration
	for range b.N {
		t, p, bz := burst(b, n)
		took, plans, busy = took+t, plans+p, busy+bz
	}
	b.ReportMetric(float64(plans)*1000/float64(n*b.N), "plans/1000-submits")
	b.ReportMetric(100*busy.Seconds()/took.Seconds(), "planning-%")
}

// flakyRaft refuses the first n applies, like a leader in the middle of
// stepping down or a full apply queue.
type flakyRaft struct {
	*fakeRaft
	mu    sync.Mutex
	fails int
}

var errFlaky = errors.New("apply failed")

func (r *flakyRaft) Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	r.mu.Lock()
	if r.fails > 0 && cmd.Type == fsm.CmdPlace {
		r.fails--
		r.mu.Unlock()
		return nil, errFlaky
	}
	r.mu.Unlock()
	return r.fakeRaft.Apply(ctx, cmd)
}

func TestLoopRetriesFailedApply(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)})
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "job1",
		Spec: fsm.JobSpec{Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 100, MemoryMB: 64}}}}})
	fr := &flakyRaft{fakeRaft: e.r, fails: 1}
	cfg := loopConfig()
	_, stop := e.startWith(cfg, Deps{Raft: fr, State: e.f, Clock: e.clk})
	defer stop()
	eventually(t, "the failed apply", func() bool { fr.mu.Lock(); defer fr.mu.Unlock(); return fr.fails == 0 })
	e.clk.Advance(cfg.RetryDelay)
	if a := e.waitPlaced("job1", 1); !a.AssignedAt.Equal(t0.Add(cfg.RetryDelay)) {
		t.Fatalf("placed at %v, want after RetryDelay", a.AssignedAt)
	}
}

func TestNewChecksDeps(t *testing.T) {
	if _, err := New(DefaultConfig(), Deps{}, nil); !errors.Is(err, ErrMissingDep) {
		t.Fatalf("err = %v, want ErrMissingDep", err)
	}
	bad := DefaultConfig()
	bad.BatchSize = 0
	if _, err := New(bad, Deps{}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
}

// steppingDownRaft loses leadership after answering LeaderSince once.
type steppingDownRaft struct {
	*fakeRaft
	calls int
}

func (r *steppingDownRaft) LeaderSince() time.Time {
	r.calls++
	if r.calls > 1 {
		return time.Time{}
	}
	return r.fakeRaft.LeaderSince()
}

func (r *steppingDownRaft) LastHeardFrom(string) (time.Time, bool) { return time.Time{}, false }

// Losing leadership while the snapshot is built must not let the plan
// treat "no answer" as "never heard" (and mark attempts lost early).
func TestLoopRefusesPlanAcrossLeadershipLoss(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)})
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "job1",
		Spec: fsm.JobSpec{Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 1, MemoryMB: 1}}}}})
	s, err := New(loopConfig(), Deps{Raft: &steppingDownRaft{fakeRaft: e.r}, State: e.f, Clock: e.clk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.planOnce(context.Background(), newInflight(s.applyAll)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("err = %v, want ErrNotLeader", err)
	}
	if len(e.r.commands(fsm.CmdPlace)) != 0 {
		t.Fatal("planned after losing leadership")
	}
}

// Coalescing is a leading edge: after a quiet spell a change is planned at
// once (the fake clock does not move, so any added wait would hang), and
// within the window of the last plan the next one waits for it.
func TestLoopPlansAtOnceAfterQuiet(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)})
	cfg := loopConfig()
	cfg.Coalesce = 20 * time.Millisecond
	s, stop := e.start(cfg)
	defer stop()
	eventually(t, "first plan", func() bool { return s.Plans() >= 1 })
	e.clk.Advance(time.Second) // quiet: the last plan is long past
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "a", Spec: fsm.JobSpec{Command: []string{"true"}}}}})
	e.waitPlaced("a", 1)
	// The plan that placed "a" started at the current fake time, so the
	// next change waits out the window: it is placed once the clock moves.
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "b", Spec: fsm.JobSpec{Command: []string{"true"}}}}})
	e.clk.Advance(cfg.Coalesce)
	e.waitPlaced("b", 1)
}

// The leader's view asks when it last heard from exactly the nodes that are
// neither alive nor suspect, also when the plans reuse one node list (the
// positions are kept with the node index) and after that list changes.
func TestLeaderViewAsksAboutNodesNotAlive(t *testing.T) {
	r := &fakeRaft{t: t, leaderSince: t0, heard: map[string]time.Time{}}
	for _, n := range []string{"a", "b", "c", "d"} {
		r.heard[n] = t0.Add(time.Second)
	}
	s := &Scheduler{raft: r}
	nodes := []fsm.Node{{Name: "a", Gossip: fsm.NodeAlive}, {Name: "b", Gossip: fsm.NodeDead},
		{Name: "c", Gossip: fsm.NodeSuspect}, {Name: "d", Gossip: fsm.NodeLeft}}
	heard := func(nodes []fsm.Node) []string {
		snap := &Snapshot{Nodes: nodes, LastHeard: map[string]time.Time{}}
		if err := s.leaderView(snap); err != nil {
			t.Fatal(err)
		}
		var out []string
		for n := range snap.LastHeard {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	for range 2 { // the second plan reuses the cached positions
		if got := heard(nodes); !slices.Equal(got, []string{"b", "d"}) {
			t.Fatalf("asked about %v, want [b d]", got)
		}
	}
	changed := slices.Clone(nodes)
	changed[0].Gossip, changed[1].Gossip = fsm.NodeDead, fsm.NodeAlive
	if got := heard(changed); !slices.Equal(got, []string{"a", "d"}) {
		t.Fatalf("after the change asked about %v, want [a d]", got)
	}
}
