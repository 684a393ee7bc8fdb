package sched

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Placements still committing (Snapshot.Placing) take their room and
// their queue slot, and their jobs are not examined again.
func TestPlanCountsPlacing(t *testing.T) {
	placing := []Placing{{Placement: fsm.Placement{JobID: "a", Node: "n1", Resources: fsm.Resources{CPU: 1000, MemoryMB: 512}}, Queue: "q"}}
	tests := []struct {
		name    string
		placing []Placing
		limits  map[string]int
		want    map[string]string // job → node
		reason  map[string]string
	}{
		{name: "without placing", want: map[string]string{"a": "n1", "b": "n2"}},
		{name: "room and job taken", placing: placing, want: map[string]string{"b": "n2"},
			reason: map[string]string{"c": "2 nodes: 2 insufficient cpu"}},
		{name: "queue slot taken", placing: placing, limits: map[string]int{"q": 1}, want: map[string]string{},
			reason: map[string]string{"b": "queue q at max_running 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &Snapshot{Nodes: []fsm.Node{node("n1", 1000, 1024), node("n2", 1000, 1024)},
				QueueLimits: tt.limits, Running: map[string]int{}, Placing: tt.placing}
			for _, id := range []string{"a", "b", "c"} {
				j := job(id, 50, 1000, 512)
				j.Spec.Queue = "q"
				snap.Pending = append(snap.Pending, j)
			}
			d := decode(t, Plan(snap, t0, testConfig()))
			got := d.placedOn()
			if len(got) != len(tt.want) {
				t.Fatalf("placed %v, want %v", got, tt.want)
			}
			for j, n := range tt.want {
				if got[j] != n {
					t.Fatalf("placed %v, want %v", got, tt.want)
				}
			}
			for j, r := range tt.reason {
				if d.reasons[j] != r {
					t.Fatalf("reason of %s = %q, want %q (reasons %v)", j, d.reasons[j], r, d.reasons)
				}
			}
			if _, ok := d.reasons["a"]; ok && tt.placing != nil {
				t.Fatal("a job being placed got a reason")
			}
		})
	}
}

// The same through LoadSnapshot's index runs (the job is still queued in
// the state while its placement commits).
func TestPlanSkipsPlacingInIndexRuns(t *testing.T) {
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &fakeRaft{t: t, f: f}
	apply := func(typ fsm.CommandType, payload any) {
		cmd, err := fsm.NewCommand(typ, t0, payload)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := r.Apply(context.Background(), cmd); err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
	}
	apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 1000, 1024)})
	apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n2", 1000, 1024)})
	spec := fsm.JobSpec{Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 1000, MemoryMB: 512}}
	apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "a", Spec: spec}, {ID: "b", Spec: spec}, {ID: "c", Spec: spec}}})
	var d decoded
	if err := f.View(func(tx *fsm.Tx) error {
		snap, err := LoadSnapshot(tx, t0)
		if err != nil {
			return err
		}
		snap.Placing = []Placing{{Placement: fsm.Placement{JobID: "a", Node: "n1", Resources: spec.Resources}}}
		d = decode(t, Plan(snap, t0, testConfig()))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := d.placedOn(); len(got) != 1 || got["b"] != "n2" {
		t.Fatalf("placed %v, want only b on n2", got)
	}
}

// gatedRaft holds the Place commands for one node until released, like a
// slow commit round.
type gatedRaft struct {
	*fakeRaft
	node    string
	gate    chan struct{}
	mu      sync.Mutex
	waiting int
}

func (r *gatedRaft) Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	if cmd.Type == fsm.CmdPlace {
		var p fsm.Place
		if err := cmd.DecodePayload(&p); err != nil {
			return nil, err
		}
		if len(p.Placements) > 0 && p.Placements[0].Node == r.node {
			r.mu.Lock()
			r.waiting++
			r.mu.Unlock()
			select {
			case <-r.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return r.fakeRaft.Apply(ctx, cmd)
}

// A plan does not wait for the previous plan's placements to commit: while
// n1's placement is held, a finish on n2 gets n2 its next job, and the
// held job is neither placed twice nor is its room given away.
func TestLoopPlansWhilePlacementsCommit(t *testing.T) {
	for _, inFlight := range []int{DefaultConfig().PlansInFlight} { // 1 fails: the loop waits for a-held's commit
		e := newLoopEnv(t)
		e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 1000, 1024)})
		e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n2", 1000, 1024)})
		spec := fsm.JobSpec{Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 1000, MemoryMB: 512}}
		e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "0-run", Spec: spec}}})
		gr := &gatedRaft{fakeRaft: e.r, gate: make(chan struct{})}
		cfg := loopConfig()
		cfg.PlansInFlight = inFlight
		_, stop := e.startWith(cfg, Deps{Raft: gr, State: e.f, Clock: e.clk})
		// "0-run" lands on n1 (binpack, first by name) and runs; then n2's
		// placements are held while three more jobs arrive.
		first := e.waitPlaced("0-run", 1)
		if first.Node != "n1" {
			t.Fatalf("run placed on %s", first.Node)
		}
		gr.mu.Lock()
		gr.node = "n2"
		gr.mu.Unlock()
		e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "a-held", Spec: spec}, {ID: "b-next", Spec: spec}, {ID: "c-last", Spec: spec}}})
		eventually(t, "held's placement on n2 to be committing", func() bool { gr.mu.Lock(); defer gr.mu.Unlock(); return gr.waiting == 1 })
		code := 0
		e.apply(fsm.CmdReport, &fsm.ReportAttempt{JobID: first.JobID, Attempt: first.Num, FencingToken: first.FencingToken,
			Node: first.Node, State: fsm.AttemptSucceeded, ExitCode: &code})
		a := e.waitPlaced("b-next", 1) // hangs (and fails) if the loop waits for held's commit
		if a.Node != "n1" {
			t.Fatalf("next placed on %s, want n1 (n2's room is held)", a.Node)
		}
		close(gr.gate)
		h := e.waitPlaced("a-held", 1)
		if h.Node != "n2" {
			t.Fatalf("held placed on %s", h.Node)
		}
		if j := e.job("c-last"); j.State != fsm.JobQueued {
			t.Fatalf("last is %s: the cluster was over-committed", j.State)
		}
		if got := len(e.r.commands(fsm.CmdPlace)); got > 4 {
			t.Fatalf("%d Place commands", got)
		}
		stop()
	}
}

// A finish that frees room for a waiting job is planned at once, inside
// the coalescing window (the fake clock never moves, so the window never
// ends by itself); a change that frees nothing still waits it out.
func TestLoopFreedRoomJumpsWindow(t *testing.T) {
	e := newLoopEnv(t)
	// Room for one of a and b, and beside it for c (placed as DefaultRequest).
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 1100, 1024)})
	cfg := loopConfig()
	cfg.Coalesce = 20 * time.Millisecond // of the fake clock, which only the test moves
	s, stop := e.start(cfg)
	defer stop()
	eventually(t, "first plan", func() bool { return s.Plans() >= 1 })
	e.clk.Advance(time.Second) // quiet: the next change is planned at once
	spec := fsm.JobSpec{Command: []string{"sleep", "1"}, Priority: 50, Resources: fsm.Resources{CPU: 1000, MemoryMB: 512}}
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "a", Spec: spec}, {ID: "b", Spec: spec}}})
	a := e.waitPlaced("a", 1)
	eventually(t, "b's reason", func() bool { return e.job("b").Reason != "" })
	// The state holds a's placement before its background apply returns;
	// until then the loop still counts a's room as placing, so a finish in
	// that gap frees nothing for one plan (DESIGN.md, plans in flight) and
	// b would wait a window of a clock that never moves.
	eventually(t, "a's apply to end", func() bool { return s.inf.Load().count() == 0 })
	// A submit frees no room: it waits for the window (for the clock).
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "c", Spec: fsm.JobSpec{Command: []string{"true"}}}}})
	plans := s.Plans()
	// a's finish frees n1 for b: planned without the clock moving.
	code := 0
	e.apply(fsm.CmdReport, &fsm.ReportAttempt{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken,
		Node: a.Node, State: fsm.AttemptSucceeded, ExitCode: &code})
	e.waitPlaced("b", 1) // hangs (and fails) if the window holds the finish
	if j := e.job("c"); j.State != fsm.JobRunning {
		t.Fatalf("c is %s: the plan that placed b should have placed it too", j.State)
	}
	if got := s.Plans(); got != plans+1 {
		t.Fatalf("%d plans after the submit and the finish, want 1 (the submit waited)", got-plans)
	}
}

// A reason an earlier plan is committing is not written again.
func TestPlanSkipsPendingReasons(t *testing.T) {
	for _, pending := range []string{"", "2 nodes: 2 insufficient cpu"} {
		snap := &Snapshot{Nodes: []fsm.Node{node("n1", 1000, 1024), node("n2", 1000, 1024)}, Running: map[string]int{},
			Live:    []fsm.Attempt{liveAttempt("x", "n1", 1000, 512, 1), liveAttempt("y", "n2", 1000, 512, 2)},
			Pending: []*fsm.Job{job("c", 50, 1000, 512)}}
		if pending != "" {
			snap.PendingReasons = map[string]string{"c": pending}
		}
		d := decode(t, Plan(snap, t0, testConfig()))
		if r, ok := d.reasons["c"]; ok == (pending != "") {
			t.Fatalf("pending %q: reasons %v (%q)", pending, d.reasons, r)
		}
	}
}

// hookState runs hook (once) inside the next View, before its reader.
type hookState struct {
	*fsm.FSM
	mu   sync.Mutex
	hook func()
}

func (h *hookState) View(fn func(tx *fsm.Tx) error) error {
	return h.FSM.View(func(tx *fsm.Tx) error {
		h.mu.Lock()
		hook := h.hook
		h.hook = nil
		h.mu.Unlock()
		if hook != nil {
			hook()
		}
		return fn(tx)
	})
}

// A placement whose apply ends while the next plan's read transaction is
// open (so the snapshot misses it) must still count: the plans in flight
// are read before the transaction. Read inside it, the placement was in
// neither, and the next job went onto the same slot.
func TestLoopPlacingReadBeforeState(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 1000, 1024)})
	gr := &gatedRaft{fakeRaft: e.r, gate: make(chan struct{}), node: "n1"}
	hs := &hookState{FSM: e.f}
	s, stop := e.startWith(loopConfig(), Deps{Raft: gr, State: hs, Clock: e.clk})
	defer stop()
	spec := fsm.JobSpec{Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 1000, MemoryMB: 512}}
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "a", Spec: spec}}})
	eventually(t, "a's placement to be committing", func() bool { gr.mu.Lock(); defer gr.mu.Unlock(); return gr.waiting == 1 })
	// The next plan's View lets a's placement commit and waits until it
	// has left the plans in flight, all inside the read transaction.
	hs.mu.Lock()
	hs.hook = func() {
		close(gr.gate)
		eventually(t, "a's apply to end", func() bool { return s.inf.Load().count() == 0 })
	}
	hs.mu.Unlock()
	urgent := spec
	urgent.Priority = 90 // examined before a (still queued in the snapshot)
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "b", Spec: urgent}}})
	e.waitPlaced("a", 1)
	eventually(t, "b planned", func() bool { j := e.job("b"); return j.Reason != "" || j.State != fsm.JobQueued })
	if j := e.job("b"); j.State != fsm.JobQueued {
		t.Fatalf("b is %s on a full node: over-committed", j.State)
	}
}
