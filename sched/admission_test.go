package sched

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Admission: a node takes at most Slots live attempts, a job that requests
// nothing is placed as DefaultRequest, and a node behind the leader's log
// gets nothing. The excess stays queued with a reason, and is placed once
// room frees.

func TestPlanSlotsBoundLiveAttempts(t *testing.T) {
	cfg := testConfig()
	n1, n2 := node("n1", 64000, 1<<20), node("n2", 64000, 1<<20)
	n1.Slots, n2.Slots = 3, 2
	s := &Snapshot{Nodes: []fsm.Node{n1, n2}, LeaderSince: t0.Add(-time.Hour), Running: map[string]int{},
		Live: []fsm.Attempt{liveAttempt("old", "n1", 100, 64, 1)}}
	for i := range 10 {
		s.Pending = append(s.Pending, job(fmt.Sprintf("j%02d", i), 50, 0, 0))
	}
	d := decode(t, Plan(s, t0, cfg))
	per := map[string]int{}
	for _, p := range d.placements {
		per[p.Node]++
	}
	if per["n1"] != 2 || per["n2"] != 2 {
		t.Fatalf("placed %v, want n1 2 (3 slots, 1 live) and n2 2", per)
	}
	if len(d.reasons) != 6 {
		t.Fatalf("reasons %v, want one for each of the 6 left queued", d.reasons)
	}
	for _, r := range d.reasons {
		if r != "2 nodes: 2 insufficient slots" {
			t.Fatalf("reason %q", r)
		}
	}
	// A finish frees a slot: the next plan places exactly one more.
	applyPlan(t, s, &Decision{Commands: Plan(s, t0, cfg).Commands})
	s.Live = s.Live[1:] // "old" on n1 ended
	d = decode(t, Plan(s, t0, cfg))
	if len(d.placements) != 1 || d.placements[0].Node != "n1" {
		t.Fatalf("after a finish placed %+v, want one on n1", d.placements)
	}
}

func TestPlanDefaultRequestBoundsZeroRequestJobs(t *testing.T) {
	cfg := testConfig()
	cfg.DefaultRequest = fsm.Resources{CPU: 100, MemoryMB: 64}
	s := &Snapshot{Nodes: []fsm.Node{node("n1", 1000, 1<<20)}, LeaderSince: t0.Add(-time.Hour)}
	for i := range 30 {
		s.Pending = append(s.Pending, job(fmt.Sprintf("j%02d", i), 50, 0, 0))
	}
	mem := job("mem", 40, 0, 512) // cpu defaulted, memory its own
	s.Pending = append(s.Pending, mem)
	d := decode(t, Plan(s, t0, cfg))
	if len(d.placements) != 10 {
		t.Fatalf("placed %d zero-request jobs on 1000m, want 10 (100m each)", len(d.placements))
	}
	for _, p := range d.placements {
		if p.Resources.CPU != 100 || p.Resources.MemoryMB != 64 {
			t.Fatalf("placement %s records %+v, want the default request", p.JobID, p.Resources)
		}
	}
	for id, r := range d.reasons {
		if r != "1 node: 1 insufficient cpu" {
			t.Fatalf("%s: reason %q", id, r)
		}
	}
	// With no default the old behaviour: everything fits.
	cfg.DefaultRequest = fsm.Resources{}
	if d := decode(t, Plan(s, t0, cfg)); len(d.placements) != 31 {
		t.Fatalf("without a default placed %d, want all 31", len(d.placements))
	}
	if got := cfg.request(&mem.Spec.Resources); got.CPU != 0 || got.MemoryMB != 512 {
		t.Fatalf("request without defaults = %+v", got)
	}
	cfg.DefaultRequest = fsm.Resources{CPU: 100, MemoryMB: 64}
	if got := cfg.request(&mem.Spec.Resources); got.CPU != 100 || got.MemoryMB != 512 {
		t.Fatalf("request with defaults = %+v, want cpu 100 and its own memory", got)
	}
}

func TestPlanSkipsNodesBehind(t *testing.T) {
	cfg := testConfig()
	s := &Snapshot{Nodes: []fsm.Node{node("n1", 4000, 4096), node("n2", 4000, 4096)},
		LeaderSince: t0.Add(-time.Hour), Behind: map[string]bool{"n2": true}}
	for i := range 4 {
		s.Pending = append(s.Pending, job(fmt.Sprintf("j%d", i), 50, 0, 0))
	}
	s.Pending = append(s.Pending, job("big", 10, 4000, 1024))
	d := decode(t, Plan(s, t0, cfg))
	for _, p := range d.placements {
		if p.Node != "n1" {
			t.Fatalf("placed %s on %s, which is behind the leader's log", p.JobID, p.Node)
		}
	}
	if r := d.reasons["big"]; r != "2 nodes: 1 insufficient cpu, 1 node behind the leader's log" {
		t.Fatalf("big's reason %q", r)
	}
	s.Behind = nil // caught up
	d = decode(t, Plan(s, t0, cfg))
	on := map[string]int{}
	for _, p := range d.placements {
		on[p.Node]++
	}
	if on["n2"] == 0 {
		t.Fatalf("after catching up placed %v, want some on n2", on)
	}
}

// behindRaft is fakeRaft with a SyncView.
type behindRaft struct {
	*fakeRaft
	mu     sync.Mutex
	behind map[string]bool
	maxLag uint64
}

func (r *behindRaft) NodesBehind(maxLag uint64) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxLag = maxLag
	out := map[string]bool{}
	for k, v := range r.behind {
		out[k] = v
	}
	return out
}

// The leader loop reads the nodes behind from the cluster on every plan:
// nothing lands on them until they catch up.
func TestLoopPlacesNothingOnNodesBehind(t *testing.T) {
	e := newLoopEnv(t)
	br := &behindRaft{fakeRaft: e.r, behind: map[string]bool{"n1": true}}
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)})
	cfg := loopConfig()
	_, stop := e.startWith(cfg, Deps{Raft: br, State: e.f, Clock: e.clk})
	defer stop()
	e.apply(fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "a", Spec: fsm.JobSpec{Command: []string{"true"}}}}})
	eventually(t, "a's reason", func() bool { return e.job("a").Reason == "1 node: 1 node behind the leader's log" })
	if e.job("a").State != fsm.JobQueued {
		t.Fatalf("a is %s on a node behind the log", e.job("a").State)
	}
	br.mu.Lock()
	br.behind = nil
	lag := br.maxLag
	br.mu.Unlock()
	if lag != cfg.MaxSyncLag {
		t.Fatalf("NodesBehind asked with lag %d, want Config.MaxSyncLag %d", lag, cfg.MaxSyncLag)
	}
	e.clk.Advance(time.Second)
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 4000, 4096)}) // any change wakes the loop
	if a := e.waitPlaced("a", 1); a.Node != "n1" {
		t.Fatalf("placed on %s", a.Node)
	}
}
