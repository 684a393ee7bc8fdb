package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Raft is what the leader loop needs from the cluster (cluster.Node
// satisfies it). Apply may be called from two goroutines at once (a plan's
// placements and its reasons); the other methods are called from the
// loop's goroutine.
type Raft interface {
	// Apply commits a command and returns Apply's result (it blocks until
	// the local FSM has applied it, so the next View sees it).
	Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error)
	// Barrier waits until every entry of earlier terms is applied locally.
	Barrier(ctx context.Context) error
	// LastHeardFrom is when the leader last heard from a node (monotonic).
	LastHeardFrom(node string) (time.Time, bool)
	// LeaderSince is when this node became leader (monotonic).
	LeaderSince() time.Time
}

// SyncView is an optional part of Raft (cluster.Node has it): the nodes
// whose gossip says they are not in sync with the leader's log, or whose
// applied index trails the leader's commit index by more than maxLag.
// Plan places nothing on them (Snapshot.Behind).
type SyncView interface {
	NodesBehind(maxLag uint64) map[string]bool
}

// State is the local replicated state (*fsm.FSM satisfies it).
type State interface {
	View(fn func(tx *fsm.Tx) error) error
	// Watch signals (coalesced) after every applied batch; the channel is
	// closed when the state is closed.
	Watch() (<-chan struct{}, func())
}

// Deps are the scheduler's collaborators.
type Deps struct {
	Raft  Raft
	State State
	Clock Clock // nil = SystemClock()
	// Outputs is the cluster's object store (nil: none): the GC deletes
	// the stored outputs of the jobs it drops (gc.go).
	Outputs OutputStore
}

// ErrNotLeader means the loop found this node is no longer leader (or
// changed term) while building a snapshot; it plans again after RetryDelay
// unless its context ends first.
var ErrNotLeader = errors.New("sched: not leader")

// ErrMissingDep means New was called without a required dependency.
var ErrMissingDep = errors.New("sched: missing dependency")

// Scheduler is the leader loop. Run it while this node is leader; it keeps
// nothing across runs, so a new leader (or a new Run) starts from state.
type Scheduler struct {
	outputs OutputStore
	cfg     Config
	raft    Raft
	state   State
	clk     Clock
	log     *slog.Logger

	// usageHeldLogged: ensureUsage said once that the gate holds it.
	usageHeldLogged bool

	plans atomic.Int64
	// planNanos is the time spent loading snapshots and planning (not
	// applying); it sizes the coalescing window.
	planNanos atomic.Int64

	inf atomic.Pointer[inflight] // the running loop's plans in flight (tests read it)

	cronFires atomic.Int64 // fire commands proposed (cronloop.go)

	nodeIndex nodeIndexCache // the loop's plans' node index (one goroutine)
	specs     specMemo       // the loop's plans' job specs for preemption (one goroutine)
	recent    recentCache    // fair share's decayed usage of completed hours (one goroutine)
	groupNS   map[string]string
}

// CronCommits is how many fire commands the cron loop has proposed.
func (s *Scheduler) CronCommits() int64 { return s.cronFires.Load() }

// Plans is how many plans this scheduler has made (a metric; tests use it
// to check that bursts are coalesced).
func (s *Scheduler) Plans() int64 { return s.plans.Load() }

// PlanTime is the total time spent loading snapshots and planning.
func (s *Scheduler) PlanTime() time.Duration { return time.Duration(s.planNanos.Load()) }

// maxGroupNamespaces bounds the loop's cache of placement groups'
// namespaces (it is dropped and rebuilt past it).
const maxGroupNamespaces = 100_000

// coalesceFactor sizes the coalescing window from the last plan's cost: a
// plan that took c waits up to coalesceFactor*c (capped by Config.Coalesce)
// after it started, so under a storm of changes planning takes at most
// about 1/coalesceFactor of the leader's time, while cheap plans (the
// common case) add almost no latency.
const coalesceFactor = 5

// New checks the config and dependencies.
func New(cfg Config, deps Deps, logger *slog.Logger) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Raft == nil || deps.State == nil {
		return nil, fmt.Errorf("%w: Raft and State are required", ErrMissingDep)
	}
	if deps.Clock == nil {
		deps.Clock = SystemClock()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{cfg: cfg, raft: deps.Raft, state: deps.State, clk: deps.Clock, outputs: deps.Outputs,
		log: logger.With("component", "sched")}, nil
}

// Run schedules until ctx ends (leadership lost) or the state is closed.
// It first issues a barrier so it plans on everything earlier leaders
// committed, then plans on every state change and at the plan's next
// wake-up, never on a fixed tick. Up to Config.PlansInFlight plans of
// placements commit at once (pipeline.go).
func (s *Scheduler) Run(ctx context.Context) error {
	watch, stop := s.state.Watch()
	defer stop()
	for {
		err := s.raft.Barrier(ctx)
		if err == nil {
			break
		}
		s.log.Warn("barrier failed; retrying", "err", err)
		if !s.sleep(ctx, s.cfg.RetryDelay) {
			return ctx.Err()
		}
	}
	s.log.Info("scheduler started")
	stopCron := goUntilStopped(ctx, newCronLoop(s).run)
	defer stopCron()
	if s.cfg.DeliveryConcurrency > 0 {
		stopDeliveries := goUntilStopped(ctx, newDeliverer(s).run)
		defer stopDeliveries()
	}
	inf := newInflight(s.applyAll)
	s.inf.Store(inf)
	defer inf.wg.Wait()
	room := newRoomWatch(s.state)
	defer room.close()
	jumped := false // the last plan jumped the window (room.go)
	nextGC := s.clk.Now().Add(s.cfg.GCInterval)
	// Until accounting is on, try again every RetryDelay (not only each
	// GC tick): attempts that end before it are not counted.
	usageOn := s.ensureUsage(ctx, s.clk.Now())
	nextUsage := s.clk.Now().Add(s.cfg.RetryDelay)
	for {
		if err := inf.takeErr(); err != nil {
			// A background apply failed: plan again after RetryDelay (or
			// a change), as after a failed apply in planOnce.
			s.log.Warn("plan failed; retrying", "err", err)
			if ok, _ := s.wait(ctx, watch, nil, s.clk.Now().Add(s.cfg.RetryDelay), time.Time{}, 0, nil); !ok {
				return ctx.Err()
			}
		}
		now := s.clk.Now()
		if !now.Before(nextGC) {
			s.gc(ctx, now)
			usageOn = s.ensureUsage(ctx, now)
			nextGC = now.Add(s.cfg.GCInterval)
		}
		if !usageOn && !now.Before(nextUsage) {
			usageOn = s.ensureUsage(ctx, now)
			nextUsage = now.Add(s.cfg.RetryDelay)
		}
		wake := nextGC
		if !usageOn {
			wake = earliest(wake, nextUsage)
		}
		lastPlan := s.clk.Now()
		room.reset()
		dec, cost, err := s.planOnce(ctx, inf)
		window := min(s.cfg.Coalesce, coalesceFactor*cost)
		var jump *roomWatch // set when freed room may end the window early
		if err == nil && dec.Stats.Unplaced > 0 && !jumped {
			jump = room
		}
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			s.log.Warn("plan failed; retrying", "err", err)
			wake = earliest(wake, s.clk.Now().Add(s.cfg.RetryDelay))
		default:
			wake = earliest(wake, dec.NextWake)
		}
		var ok bool
		if ok, jumped = s.wait(ctx, watch, inf.done, wake, lastPlan, window, jump); !ok {
			return ctx.Err()
		}
	}
}

// wait blocks until the state changes, a background apply ends (applied
// signals) or wake is reached. It returns false when the loop must stop.
// Plans start at most once per window: a change after a quiet spell is
// planned at once (no added latency), while a storm of changes (every
// submit and report signals) is planned once per window, with everything
// that arrived in it. With jump set, an ended attempt or a changed node
// ends the window at once (room.go); jumped says it did.
func (s *Scheduler) wait(ctx context.Context, watch, applied <-chan struct{}, wake, lastPlan time.Time, window time.Duration, jump *roomWatch) (ok, jumped bool) {
	t := s.clk.NewTimer(wake.Sub(s.clk.Now()))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, false
	case <-t.C():
		return true, false
	case _, ok := <-watch:
		if !ok {
			return false, false
		}
	case <-applied:
	}
	d := lastPlan.Add(window).Sub(s.clk.Now())
	if window <= 0 || d <= 0 {
		return true, false
	}
	if jump == nil || jump.sub == nil {
		return s.sleep(ctx, d), false
	}
	if jump.freedSince() {
		return true, true
	}
	w := s.clk.NewTimer(d)
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, false
		case <-w.C():
			return true, false
		case ev, ok := <-jump.sub.C():
			if !ok {
				return s.sleep(ctx, d), false
			}
			if freesRoom(ev) {
				return true, true
			}
		}
	}
}

func (s *Scheduler) sleep(ctx context.Context, d time.Duration) bool {
	t := s.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

func earliest(a, b time.Time) time.Time {
	if b.IsZero() || (!a.IsZero() && a.Before(b)) {
		return a
	}
	return b
}

// planOnce loads a snapshot, plans and applies the commands in order. It
// stops at the first failed apply: the next plan starts from fresh state.
// Plan runs inside the read transaction because it reads queued jobs from
// the index lazily; the applies run after it is closed. A plan of
// placements and reasons is applied in the background (inf) once fewer
// than Config.PlansInFlight are; any other plan waits for all of them and
// is applied here.
func (s *Scheduler) planOnce(ctx context.Context, inf *inflight) (dec *Decision, cost time.Duration, err error) {
	// One reading of the clock for the whole plan: LoadSnapshot selects the
	// due jobs with it and Plan decides with it. Reading it before the
	// LastHeardFrom calls below only makes lost detection later, never
	// earlier.
	now := s.clk.Now()
	started := time.Now() // the cost is real time, whatever clock plans
	// The plans in flight are read before the state: their applies end
	// after the FSM applied them, so a placement that leaves this list
	// before the View starts is in the View, and one applied meanwhile is
	// in both (it holds back its room for one plan; the end of its apply
	// wakes the loop again). Read after the View's snapshot, a placement
	// applied and finished in between would be in neither: over-commit.
	placing, reasons := inf.pending()
	err = s.state.View(func(tx *fsm.Tx) error {
		snap, err := LoadSnapshot(tx, now)
		if err != nil {
			return fmt.Errorf("load snapshot: %w", err)
		}
		if err := s.leaderView(snap); err != nil {
			return err
		}
		snap.Placing, snap.PendingReasons = placing, reasons
		snap.NodeIndex = s.nodeIndex.get(snap.Nodes)
		snap.JobSpec = s.specs.wrap(snap.JobSpec)
		if len(snap.Shares) > 0 {
			if snap.Recent, err = s.recent.get(UsageHoursOf(tx), now, s.cfg.FairShareHalfLife); err != nil {
				return fmt.Errorf("read recent usage: %w", err)
			}
			if s.groupNS == nil || len(s.groupNS) > maxGroupNamespaces {
				s.groupNS = map[string]string{}
			}
			snap.GroupNamespaces = s.groupNS
		}
		dec = Plan(snap, now, s.cfg)
		if dec.Err != nil {
			return fmt.Errorf("read queued jobs: %w", dec.Err)
		}
		return nil
	})
	cost = time.Since(started) // loading and planning; applies wait on raft
	s.planNanos.Add(int64(cost))
	if err != nil {
		return nil, cost, err
	}
	s.plans.Add(1)
	m := metrics()
	m.planSeconds.Observe(cost.Seconds())
	m.planPlaced.Add(float64(dec.Stats.Placed))
	m.planBlocked.Set(float64(dec.Stats.Unplaced))
	if len(dec.Commands) == 0 {
		return dec, cost, nil
	}
	st := dec.Stats
	s.log.Debug("plan made", "now", now.Format(time.RFC3339Nano), "plan_ms", float64(cost.Microseconds())/1000,
		"commands", len(dec.Commands), "placed", st.Placed, "unplaced", st.Unplaced, "released", st.Released,
		"failed", st.Failed, "lost", st.Lost, "stopped", st.Stopped, "read", st.Read, "in_flight", inf.count())
	if s.cfg.PlansInFlight > 1 && pipelinable(dec.Commands) {
		if err := inf.waitBelow(ctx, s.cfg.PlansInFlight); err != nil {
			return nil, cost, err
		}
		inf.start(ctx, dec)
		return dec, cost, nil
	}
	if err := inf.waitBelow(ctx, 1); err != nil {
		return nil, cost, err
	}
	if err := s.applyAll(ctx, dec.Commands); err != nil {
		return nil, cost, err
	}
	return dec, cost, nil
}

// applyAll applies a plan's commands in order, except that the reasons
// (SetReasons, always last) are applied concurrently with the placements:
// they touch only queued jobs the plan did not place, so the two commute,
// and raft commits them together (one log write and one round trip
// instead of two). A plan that placed a job and wrote the reason of the
// next head of the queue — every hand-off of a full cluster — waited for
// two commits before the loop could plan the next change; a burst of
// finishes on several nodes was placed one commit apart per node. The
// commands before the placements (fail, lost, stop, release) still go
// first and in order: a released job must be queued before its reason is
// written, and lost or stopped attempts free the room a placement uses.
// It stops at the first failed ordered apply (after the reasons return).
func (s *Scheduler) applyAll(ctx context.Context, cmds []*fsm.Command) error {
	first := len(cmds) // the first placement or reasons command
	for i, cmd := range cmds {
		if cmd.Type == fsm.CmdPlace || cmd.Type == fsm.CmdSetReasons {
			first = i
			break
		}
	}
	var reasons, ordered []*fsm.Command
	for i, cmd := range cmds {
		if i >= first && cmd.Type == fsm.CmdSetReasons {
			reasons = append(reasons, cmd)
		} else {
			ordered = append(ordered, cmd)
		}
	}
	var wg sync.WaitGroup
	var reasonsErr error
	defer wg.Wait()
	for i, cmd := range ordered {
		if i == first && len(reasons) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reasonsErr = s.applyEach(ctx, reasons)
			}()
		}
		if err := s.applyEach(ctx, []*fsm.Command{cmd}); err != nil {
			return err
		}
	}
	if first == len(ordered) && len(reasons) > 0 { // reasons only
		return s.applyEach(ctx, reasons)
	}
	wg.Wait()
	return reasonsErr
}

// applyEach applies cmds one after the other; it stops at the first that
// fails to commit (a refusal is logged, not an error).
func (s *Scheduler) applyEach(ctx context.Context, cmds []*fsm.Command) error {
	for _, cmd := range cmds {
		res, err := s.raft.Apply(ctx, cmd)
		if err != nil {
			return fmt.Errorf("apply %s: %w", cmd.Type, err)
		}
		if res != nil && res.Err != nil {
			s.log.Warn("command refused", "type", cmd.Type, "err", res.Err)
		} else if res != nil && len(res.Skipped) > 0 {
			s.log.Debug("items skipped", "type", cmd.Type, "count", len(res.Skipped))
		}
	}
	return nil
}

// leaderView fills the leader-only fields of snap.
func (s *Scheduler) leaderView(snap *Snapshot) error {
	// LastHeardFrom answers nothing once leadership is lost, which would
	// read as "never heard" and let a dead-looking node's attempts be
	// declared lost early. So LeaderSince must be set and unchanged across
	// the reads: then every answer came from this leader's term.
	since := s.raft.LeaderSince()
	if since.IsZero() {
		return ErrNotLeader
	}
	snap.LeaderSince = since
	heard := func(name string) {
		if _, done := snap.LastHeard[name]; !done {
			if t, ok := s.raft.LastHeardFrom(name); ok {
				snap.LastHeard[name] = t
			}
		}
	}
	// Only lost detection reads LastHeard, and only for nodes not alive:
	// with thousands of clients, asking for every node was a tenth of a
	// plan.
	for _, i := range s.nodeIndex.notAlive(snap.Nodes) {
		heard(snap.Nodes[i].Name)
	}
	for i := range snap.Live { // attempts may sit on a node already removed
		if !snap.hasNode(snap.Live[i].Node) {
			heard(snap.Live[i].Node)
		}
	}
	if again := s.raft.LeaderSince(); !again.Equal(since) {
		return ErrNotLeader
	}
	if sv, ok := s.raft.(SyncView); ok {
		snap.Behind = sv.NodesBehind(s.cfg.MaxSyncLag)
	}
	return nil
}

// goUntilStopped runs loop in a goroutine under a context of its own
// (below ctx); stop cancels that context and waits for loop to return.
func goUntilStopped(ctx context.Context, loop func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(ctx)
	}()
	return func() { cancel(); <-done }
}
