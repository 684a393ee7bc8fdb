package sched

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// loadFull is the snapshot earlier versions loaded: every waiting, queued
// and retrying job in memory. Plan on it is the reference the indexed
// snapshot must agree with.
func loadFull(tb testing.TB, tx *fsm.Tx) *Snapshot {
	tb.Helper()
	s := &Snapshot{Running: map[string]int{}, LastHeard: map[string]time.Time{}}
	var err error
	if s.Nodes, err = tx.Nodes(); err != nil {
		tb.Fatal(err)
	}
	if s.QueueLimits, err = tx.Queues(); err != nil {
		tb.Fatal(err)
	}
	for _, st := range []fsm.JobState{fsm.JobQueued, fsm.JobWaiting, fsm.JobRetrying} {
		if err := tx.ForEachJobInState(st, func(j *fsm.Job) bool {
			c := *j
			s.Pending = append(s.Pending, &c)
			return true
		}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.ForEachJobInState(fsm.JobRunning, func(j *fsm.Job) bool { s.Running[j.Spec.Queue]++; return true }); err != nil {
		tb.Fatal(err)
	}
	if err := tx.LiveAttempts(func(a *fsm.Attempt) bool { s.Live = append(s.Live, *a); return true }); err != nil {
		tb.Fatal(err)
	}
	if err := loadNamespaceQuotas(tx, s); err != nil {
		tb.Fatal(err)
	}
	return s
}

// planBoth plans at now on the full and on the indexed snapshot of the
// same state.
func planBoth(t *testing.T, f *fsm.FSM, now time.Time, cfg Config) (full, indexed *Decision) {
	t.Helper()
	err := f.View(func(tx *fsm.Tx) error {
		fs := loadFull(t, tx)
		fs.LeaderSince = t0.Add(-time.Hour)
		fs.JobSpec = func(id string) *fsm.JobSpec { sp, _ := tx.JobSpec(id); return sp }
		full = Plan(fs, now, cfg)
		is, err := LoadSnapshot(tx, now)
		if err != nil {
			return err
		}
		is.LeaderSince = t0.Add(-time.Hour)
		indexed = Plan(is, now, cfg)
		return indexed.Err
	})
	if err != nil {
		t.Fatal(err)
	}
	return full, indexed
}

// The indexed snapshot plans exactly what the full one does: the same
// placements in the same order, releases, deadline failures and next
// wake. Reasons are written only for the jobs Plan read, and agree with
// the full plan's. Checked over random clusters and several rounds, with
// the commands applied to a real FSM (so the indexes are maintained across
// submit, release, place, retry, cancel and deadline failure) and attempts
// finishing in between.
func TestIndexedPlanMatchesFullPlan(t *testing.T) {
	for seed := int64(1); seed <= 25; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { indexedMatchesFull(t, seed, false) })
	}
}

// With fair share on (namespaces with shares, every source keyed by its
// namespace's key), the indexed plan still places exactly what the full
// one does.
func TestIndexedPlanMatchesFullPlanFairShare(t *testing.T) {
	for seed := int64(1); seed <= 25; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { indexedMatchesFull(t, seed, true) })
	}
}

func indexedMatchesFull(t *testing.T, seed int64, fair bool) {
	rng := newRand(seed)
	e := newLoopEnv(t)
	cfg := DefaultConfig()
	cfg.AgingInterval = time.Minute
	cfg.MinCandidates = 1 + rng.Intn(4)
	// Like reasons, preemption is planned only for the jobs a plan
	// reads (the head of each blocked group), which a full plan
	// reads all of: the two differ by design (preempt_test.go).
	cfg.Preemption = false
	for i := range 1 + rng.Intn(8) {
		n := node(fmt.Sprintf("n%02d", i), int64(1000*(1+rng.Intn(8))), int64(1024*(1+rng.Intn(8))), "zone", zones[rng.Intn(len(zones))])
		if rng.Intn(6) == 0 {
			n.Eligibility = fsm.Ineligible
		}
		if rng.Intn(2) == 0 {
			n.JobUsers = []string{"nobody"}
		}
		e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: n})
	}
	e.apply(fsm.CmdSetQueue, &fsm.SetQueue{Name: "q1", MaxRunning: 1 + rng.Intn(3)})
	// Namespace quotas and job users: part of the placement group,
	// so the indexed plan still stops each group exactly where the
	// full plan does.
	a := fsm.Namespace{Name: "a", MaxRunning: 1 + rng.Intn(4)}
	b := fsm.Namespace{Name: "b", MaxCPU: int64(500 * (1 + rng.Intn(6)))}
	if fair {
		a.Share, b.Share = int64(1+rng.Intn(4)), int64(1+rng.Intn(4))
		e.apply(fsm.CmdSetNamespace, &fsm.SetNamespace{Namespace: fsm.Namespace{Name: "c", Share: int64(1 + rng.Intn(4))}})
	}
	e.apply(fsm.CmdSetNamespace, &fsm.SetNamespace{Namespace: a})
	e.apply(fsm.CmdSetNamespace, &fsm.SetNamespace{Namespace: b})
	namespaces := []string{"", "a", "b"}
	if fair {
		namespaces = append(namespaces, "c", "c", "c")
	}
	next := 0
	submit := func(n int) {
		p := &fsm.SubmitJobs{}
		for range n {
			next++
			spec := fsm.JobSpec{Command: []string{"true"}, Priority: 25 * rng.Intn(5), MaxAttempts: 3,
				Resources: fsm.Resources{CPU: int64(500 * rng.Intn(4)), MemoryMB: int64(512 * rng.Intn(3))},
				Backoff:   fsm.Backoff{Initial: fsm.Duration(time.Duration(1+rng.Intn(90)) * time.Second), Multiplier: 1}}
			switch rng.Intn(10) {
			case 0:
				spec.Queue = "q1"
			case 1:
				spec.Constraints = []string{"zone == " + zones[rng.Intn(len(zones))]}
			case 2:
				spec.Constraints = []string{"gpu == yes"} // matches no node
			case 3:
				spec.Resources.CPU = 1_000_000 // fits no node
			}
			spec.Namespace = namespaces[rng.Intn(len(namespaces))]
			if rng.Intn(5) == 0 {
				spec.User = []string{"nobody", "root"}[rng.Intn(2)]
			}
			if rng.Intn(4) == 0 {
				rt := e.clk.Now().Add(time.Duration(rng.Intn(600)-60) * time.Second)
				spec.RunAt = &rt
			}
			if rng.Intn(5) == 0 {
				dl := e.clk.Now().Add(time.Duration(rng.Intn(900)) * time.Second)
				spec.Deadline = &dl
			}
			p.Jobs = append(p.Jobs, fsm.NewJob{ID: fmt.Sprintf("01J%023d", next), Spec: spec})
		}
		e.apply(fsm.CmdSubmitJobs, p)
	}
	for range 20 {
		e.clk.Advance(time.Duration(rng.Intn(120)) * time.Second)
		submit(rng.Intn(40))
		if rng.Intn(3) == 0 && next > 0 {
			e.r.Apply(context.Background(), mustCommand(fsm.CmdCancelJob, e.clk.Now(),
				&fsm.CancelJob{JobID: fmt.Sprintf("01J%023d", 1+rng.Intn(next))}))
		}
		now := e.clk.Now()
		full, idx := planBoth(t, e.f, now, cfg)
		compareDecisions(t, full, idx)
		for _, cmd := range idx.Commands {
			if _, err := e.r.Apply(context.Background(), cmd); err != nil {
				t.Fatal(err)
			}
		}
		// Some attempts finish: succeed, or fail into a retry.
		var live []fsm.Attempt
		_ = e.f.View(func(tx *fsm.Tx) error {
			return tx.LiveAttempts(func(a *fsm.Attempt) bool { live = append(live, *a); return true })
		})
		for _, a := range live {
			switch rng.Intn(3) {
			case 0:
				e.fail(&a)
			case 1:
				e.apply(fsm.CmdReport, &fsm.ReportAttempt{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken,
					Node: a.Node, State: fsm.AttemptSucceeded})
			}
		}
	}
}

func compareDecisions(t *testing.T, full, idx *Decision) {
	t.Helper()
	df, di := decode(t, full), decode(t, idx)
	if !slices.EqualFunc(df.placements, di.placements, samePlacement) {
		t.Fatalf("placements differ:\nfull    %v\nindexed %v", df.placements, di.placements)
	}
	if !slices.Equal(sorted(df.released), sorted(di.released)) {
		t.Fatalf("released differ: full %v indexed %v", df.released, di.released)
	}
	if !maps.Equal(df.failed, di.failed) {
		t.Fatalf("failed differ: full %v indexed %v", df.failed, di.failed)
	}
	if !full.NextWake.Equal(idx.NextWake) {
		t.Fatalf("next wake: full %v indexed %v", full.NextWake, idx.NextWake)
	}
	for id, r := range di.reasons {
		if df.reasons[id] != r {
			t.Fatalf("reason of %s: indexed %q, full %q", id, r, df.reasons[id])
		}
	}
	if full.Stats.Placed != idx.Stats.Placed || full.Stats.Released != idx.Stats.Released || full.Stats.Failed != idx.Stats.Failed {
		t.Fatalf("stats: full %+v indexed %+v", full.Stats, idx.Stats)
	}
}

func samePlacement(a, b fsm.Placement) bool {
	return a.JobID == b.JobID && a.Node == b.Node && a.Resources.CPU == b.Resources.CPU && a.Resources.MemoryMB == b.Resources.MemoryMB
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// A deep backlog that does not fit costs one read per placement group,
// not one per job, and waiting jobs far ahead cost nothing.
func TestIndexedPlanReadsOnlyWhatItCanPlace(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)})
	runAt := t0.Add(time.Hour)
	p := &fsm.SubmitJobs{}
	for i := range 2000 {
		spec := fsm.JobSpec{Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 1000, MemoryMB: 100}}
		switch i % 4 {
		case 1:
			spec.RunAt = &runAt
		case 2:
			spec.Resources.MemoryMB = 200 // a second group
		case 3:
			spec.Constraints = []string{"gpu == yes"} // a third group, fits nowhere
		}
		p.Jobs = append(p.Jobs, fsm.NewJob{ID: fmt.Sprintf("01J%023d", i), Spec: spec})
	}
	e.apply(fsm.CmdSubmitJobs, p)
	full, idx := planBoth(t, e.f, t0, testConfig())
	compareDecisions(t, full, idx)
	if idx.Stats.Placed != 4 {
		t.Fatalf("placed %d, want 4 (four 1-cpu slots)", idx.Stats.Placed)
	}
	// 4 placed + the first misfit of each of the three groups.
	if idx.Stats.Read != 7 || idx.Stats.Unplaced != 3 {
		t.Fatalf("read %d jobs, %d unplaced; want 7 and 3", idx.Stats.Read, idx.Stats.Unplaced)
	}
	if !idx.NextWake.Equal(runAt) {
		t.Fatalf("next wake %v, want the run_at %v", idx.NextWake, runAt)
	}
}
