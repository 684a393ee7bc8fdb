package sched

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

func TestPlanFeasibilityReasons(t *testing.T) {
	gpuNode := node("gpu1", 4000, 8192, "gpu_model", "a100")
	gpuNode.Capacity.Named = map[string]int64{"gpu": 2}
	dead := node("dead1", 8000, 8192)
	dead.Gossip = fsm.NodeDead
	drain := node("drain1", 8000, 8192)
	drain.Eligibility = fsm.Draining
	noDriver := node("proc1", 8000, 8192)
	noDriver.Drivers = []string{"process"}

	tests := []struct {
		name   string
		nodes  []fsm.Node
		live   []fsm.Attempt
		mutate func(*fsm.Job)
		want   string // placed node, or "" when unplaced
		reason string
	}{
		{name: "fits", nodes: []fsm.Node{node("a", 1000, 1024)}, want: "a"},
		{name: "no nodes", reason: "no nodes"},
		{name: "memory exceeds capacity",
			nodes:  []fsm.Node{node("a", 4000, 256), node("b", 4000, 256)},
			reason: "2 nodes: 2 memory exceeds node capacity"},
		{name: "busy memory",
			nodes:  []fsm.Node{node("a", 4000, 1024)},
			live:   []fsm.Attempt{liveAttempt("other", "a", 100, 1000, 5)},
			reason: "1 node: 1 insufficient memory"},
		{name: "mixed reasons",
			nodes:  []fsm.Node{node("a", 4000, 256), node("b", 4000, 256), node("c", 4000, 4096)},
			mutate: func(j *fsm.Job) { j.Spec.Constraints = []string{"gpu_model in (a100,h100)"} },
			reason: "3 nodes: 3 missing label gpu_model"},
		{name: "example reason",
			nodes:  []fsm.Node{node("a", 4000, 256), node("b", 4000, 256), node("c", 4000, 4096)},
			mutate: func(j *fsm.Job) { j.Spec.Constraints = []string{"not_has gpu_model"}; j.Spec.Resources.MemoryMB = 512 },
			reason: "3 nodes: 2 memory exceeds node capacity"}, // c fits → placed; covered below
		{name: "unmet constraint",
			nodes:  []fsm.Node{node("a", 4000, 4096, "zone", "b")},
			mutate: func(j *fsm.Job) { j.Spec.Constraints = []string{"zone == a"} },
			reason: "1 node: 1 unmet zone == a"},
		{name: "constraint honoured",
			nodes:  []fsm.Node{node("a", 4000, 4096, "zone", "b"), node("b", 4000, 4096, "zone", "a")},
			mutate: func(j *fsm.Job) { j.Spec.Constraints = []string{"zone == a"} },
			want:   "b"},
		{name: "dead, draining, driver",
			nodes:  []fsm.Node{dead, drain, noDriver},
			mutate: func(j *fsm.Job) { j.Spec.Driver = "container" },
			reason: "3 nodes: 1 driver container unavailable, 1 node dead, 1 node draining"},
		{name: "named resource",
			nodes:  []fsm.Node{node("a", 4000, 4096), gpuNode},
			mutate: func(j *fsm.Job) { j.Spec.Resources.Named = map[string]int64{"gpu": 2} },
			want:   "gpu1"},
		{name: "named resource busy",
			nodes:  []fsm.Node{node("a", 4000, 4096), gpuNode},
			live:   []fsm.Attempt{{JobID: "x", Num: 1, Node: "gpu1", State: fsm.AttemptRunning, Resources: fsm.Resources{Named: map[string]int64{"gpu": 1}}}},
			mutate: func(j *fsm.Job) { j.Spec.Resources.Named = map[string]int64{"gpu": 2} },
			reason: "2 nodes: 1 gpu exceeds node capacity, 1 insufficient gpu"},
		{name: "bad constraint", nodes: []fsm.Node{node("a", 4000, 4096)},
			mutate: func(j *fsm.Job) { j.Spec.Constraints = []string{"zone ~ a"} },
			reason: `constraints[0]: invalid constraint "zone ~ a": unknown operator "~" (valid operators: ==, !=, in, not_in, has, not_has, >=, <=, >, <)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := job("j1", 50, 500, 512)
			if tt.mutate != nil {
				tt.mutate(j)
			}
			snap := &Snapshot{Nodes: tt.nodes, Live: tt.live, Pending: []*fsm.Job{j}}
			d := decode(t, Plan(snap, t0, testConfig()))
			got := d.placedOn()["j1"]
			if tt.name == "example reason" {
				if got != "c" {
					t.Fatalf("placed on %q, want c", got)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("placed on %q, want %q (reasons %v)", got, tt.want, d.reasons)
			}
			if d.reasons["j1"] != tt.reason {
				t.Fatalf("reason = %q, want %q", d.reasons["j1"], tt.reason)
			}
		})
	}
}

func TestPlanReasonOnlyWhenChanged(t *testing.T) {
	j := job("j1", 50, 500, 9999)
	snap := &Snapshot{Nodes: []fsm.Node{node("a", 1000, 1024)}, Pending: []*fsm.Job{j}}
	d := decode(t, Plan(snap, t0, testConfig()))
	if d.reasons["j1"] == "" {
		t.Fatal("no reason for an unplaceable job")
	}
	j.Reason = d.reasons["j1"]
	if d2 := Plan(snap, t0, testConfig()); len(d2.Commands) != 0 {
		t.Fatalf("second plan emitted %d commands, want none (reason unchanged)", len(d2.Commands))
	}
}

func TestPlanBinpackVersusSpread(t *testing.T) {
	nodes := []fsm.Node{node("a", 4000, 4096), node("b", 4000, 4096), node("c", 4000, 4096)}
	live := []fsm.Attempt{liveAttempt("x", "b", 2000, 2048, 3)} // b is the fullest
	for _, tt := range []struct {
		placement string
		want      []string
	}{
		{"", []string{"b", "b"}},
		{"binpack", []string{"b", "b"}},
		{"spread", []string{"a", "c"}},
	} {
		t.Run("placement="+tt.placement, func(t *testing.T) {
			j1, j2 := job("j1", 50, 1000, 1024), job("j2", 50, 1000, 1024)
			j2.SubmittedAt = t0.Add(time.Second)
			j1.Spec.Placement, j2.Spec.Placement = tt.placement, tt.placement
			d := decode(t, Plan(&Snapshot{Nodes: nodes, Live: live, Pending: []*fsm.Job{j1, j2}}, t0, testConfig()))
			on := d.placedOn()
			if got := []string{on["j1"], on["j2"]}; !slices.Equal(got, tt.want) {
				t.Fatalf("placed on %v, want %v", got, tt.want)
			}
		})
	}
}

// Jobs that request nothing go where the fewest attempts run, whatever the
// placement: bin-packing them would put every process on one node.
func TestPlanSpreadsJobsThatRequestNothing(t *testing.T) {
	nodes := []fsm.Node{node("a", 4000, 4096), node("b", 4000, 4096), node("c", 4000, 4096)}
	live := []fsm.Attempt{liveAttempt("x", "b", 0, 0, 3), liveAttempt("y", "b", 1000, 1024, 4)}
	var pending []*fsm.Job
	for i := range 7 {
		j := job(fmt.Sprintf("j%d", i), 50, 0, 0)
		j.SubmittedAt = t0.Add(time.Duration(i) * time.Second)
		pending = append(pending, j)
	}
	d := decode(t, Plan(&Snapshot{Nodes: nodes, Live: live, Pending: pending}, t0, testConfig()))
	per := map[string]int{}
	for _, n := range d.placedOn() {
		per[n]++
	}
	// b already runs 2: the 7 new ones make every node end with 3.
	if per["a"] != 3 || per["b"] != 1 || per["c"] != 3 {
		t.Fatalf("placed per node %v, want a:3 b:1 c:3", per)
	}
}

func TestPlanNeverOvercommitsWithinOnePlan(t *testing.T) {
	var jobs []*fsm.Job
	for i := range 10 {
		jobs = append(jobs, job(string(rune('a'+i)), 50, 1000, 1000))
	}
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{node("n", 3500, 100000)}, Pending: jobs}, t0, testConfig()))
	if len(d.placements) != 3 {
		t.Fatalf("placed %d jobs on a node with room for 3", len(d.placements))
	}
	if len(d.reasons) != 7 {
		t.Fatalf("%d reasons, want 7", len(d.reasons))
	}
}

func TestPlanPriorityFIFOAndAging(t *testing.T) {
	// One slot; who gets it?
	n := []fsm.Node{node("n", 1000, 1024)}
	mk := func(id string, prio int, submitted time.Duration) *fsm.Job {
		j := job(id, prio, 1000, 1024)
		j.SubmittedAt = t0.Add(submitted)
		return j
	}
	tests := []struct {
		name  string
		jobs  []*fsm.Job
		aging time.Duration
		now   time.Time
		want  string
	}{
		{"higher priority first", []*fsm.Job{mk("lo", 10, 0), mk("hi", 90, time.Minute)}, 0, t0.Add(time.Hour), "hi"},
		{"FIFO within priority", []*fsm.Job{mk("later", 50, time.Second), mk("first", 50, 0)}, 0, t0.Add(time.Hour), "first"},
		{"ID breaks ties", []*fsm.Job{mk("b", 50, 0), mk("a", 50, 0)}, 0, t0, "a"},
		{"aging lifts old low priority", []*fsm.Job{mk("old", 10, 0), mk("new", 50, 50*time.Minute)}, time.Minute, t0.Add(51 * time.Minute), "old"},
		{"aging not yet enough", []*fsm.Job{mk("old", 10, 0), mk("new", 50, 30*time.Minute)}, time.Minute, t0.Add(31 * time.Minute), "new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.AgingInterval = tt.aging
			d := decode(t, Plan(&Snapshot{Nodes: n, Pending: tt.jobs}, tt.now, cfg))
			if len(d.placements) != 1 || d.placements[0].JobID != tt.want {
				t.Fatalf("placements %v, want only %s", d.placements, tt.want)
			}
		})
	}
}

func TestEffectivePriority(t *testing.T) {
	cfg := DefaultConfig() // +1 per minute, cap 100
	j := job("j", 10, 1, 1)
	for _, tt := range []struct {
		wait time.Duration
		want int
	}{{0, 10}, {59 * time.Second, 10}, {time.Minute, 11}, {89 * time.Minute, 99}, {10 * time.Hour, 100}} {
		if got := EffectivePriority(j, t0.Add(tt.wait), cfg); got != tt.want {
			t.Errorf("after %v: %d, want %d", tt.wait, got, tt.want)
		}
	}
	// A retry ages from NextRunAt, not from submission.
	r := job("r", 10, 1, 1)
	r.NextRunAt = t0.Add(time.Hour)
	if got := EffectivePriority(r, t0.Add(time.Hour+2*time.Minute), cfg); got != 12 {
		t.Errorf("retry aged to %d, want 12", got)
	}
}

func TestPlanQueueLimits(t *testing.T) {
	nodes := []fsm.Node{node("n", 100000, 100000)}
	var jobs []*fsm.Job
	for i := range 5 {
		j := job(string(rune('a'+i)), 50, 1, 1)
		j.Spec.Queue = "batch"
		jobs = append(jobs, j)
	}
	free := job("z", 50, 1, 1) // default queue, unlimited
	jobs = append(jobs, free)
	snap := &Snapshot{Nodes: nodes, Pending: jobs,
		QueueLimits: map[string]int{"batch": 3}, Running: map[string]int{"batch": 1}}
	d := decode(t, Plan(snap, t0, testConfig()))
	on := d.placedOn()
	if len(on) != 3 || on["a"] == "" || on["b"] == "" || on["z"] == "" {
		t.Fatalf("placed %v, want a, b (2 free batch slots) and z", on)
	}
	if d.reasons["c"] != "queue batch at max_running 3" {
		t.Fatalf("reason %q", d.reasons["c"])
	}
}

func TestPlanReleasesAndRunAt(t *testing.T) {
	nodes := []fsm.Node{node("n", 100000, 100000)}
	retry := job("retry", 50, 1, 1)
	retry.State, retry.NextRunAt = fsm.JobRetrying, t0.Add(30*time.Second)
	wait := job("runat", 50, 1, 1)
	wait.State, wait.NextRunAt = fsm.JobWaiting, t0.Add(time.Hour)
	deps := job("deps", 50, 1, 1)
	deps.State = fsm.JobWaiting // waits on dependencies: never released here
	snap := &Snapshot{Nodes: nodes, Pending: []*fsm.Job{retry, wait, deps}}

	tests := []struct {
		now      time.Time
		released []string
		wake     time.Time
	}{
		{t0, nil, t0.Add(30 * time.Second)},
		{t0.Add(30*time.Second - 1), nil, t0.Add(30 * time.Second)},
		{t0.Add(30 * time.Second), []string{"retry"}, t0.Add(time.Hour)},
		{t0.Add(2 * time.Hour), []string{"retry", "runat"}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.now.Sub(t0).String(), func(t *testing.T) {
			dec := Plan(snap, tt.now, testConfig())
			d := decode(t, dec)
			if !slices.Equal(d.released, tt.released) {
				t.Fatalf("released %v, want %v", d.released, tt.released)
			}
			// Released jobs are placed in the same plan, after the release.
			for _, id := range tt.released {
				if d.placedOn()[id] == "" {
					t.Fatalf("%s released but not placed", id)
				}
			}
			if len(tt.released) > 0 && slices.Index(d.types, fsm.CmdRelease) > slices.Index(d.types, fsm.CmdPlace) {
				t.Fatalf("release after place: %v", d.types)
			}
			if !dec.NextWake.Equal(tt.wake) {
				t.Fatalf("next wake %v, want %v", dec.NextWake, tt.wake)
			}
		})
	}
}

func TestPlanDeadline(t *testing.T) {
	nodes := []fsm.Node{node("n", 1000, 1000)}
	mk := func(id string, state fsm.JobState, deadline time.Duration) *fsm.Job {
		j := job(id, 50, 2000, 1) // never fits
		j.State = state
		d := t0.Add(deadline)
		j.Spec.Deadline = &d
		if state != fsm.JobQueued {
			j.NextRunAt = t0.Add(time.Hour)
		}
		return j
	}
	snap := &Snapshot{Nodes: nodes, Pending: []*fsm.Job{
		mk("past", fsm.JobQueued, -time.Second), mk("now", fsm.JobRetrying, 0), mk("later", fsm.JobQueued, time.Minute),
	}}
	dec := Plan(snap, t0, testConfig())
	d := decode(t, dec)
	if len(d.failed) != 2 || d.failed["past"] != fsm.ReasonDeadline || d.failed["now"] != fsm.ReasonDeadline {
		t.Fatalf("failed %v, want past and now with reason deadline", d.failed)
	}
	if !dec.NextWake.Equal(t0.Add(time.Minute)) {
		t.Fatalf("next wake %v, want the later deadline", dec.NextWake)
	}
	if d.types[0] != fsm.CmdFailJobs {
		t.Fatalf("first command %s, want fail_jobs", d.types[0])
	}
}

func TestPlanLostDetection(t *testing.T) {
	cfg := testConfig() // L = 6s, margin = 3s
	wait := cfg.LeaseDuration + cfg.SafetyMargin
	deadNode := node("d", 1000, 1000)
	deadNode.Gossip = fsm.NodeDead
	leftNode := node("l", 1000, 1000)
	leftNode.Gossip = fsm.NodeLeft
	suspect := node("s", 1000, 1000)
	suspect.Gossip = fsm.NodeSuspect
	deadClient := node("c", 1000, 1000)
	deadClient.Gossip, deadClient.Role = fsm.NodeDead, fsm.RoleClient
	clientWait := cfg.LeaseDuration + cfg.ClientSafetyMargin

	tests := []struct {
		name        string
		n           fsm.Node
		heard       time.Duration // since t0; <0 = never heard
		leaderSince time.Duration
		now         time.Duration
		lost        bool
		wake        time.Duration
	}{
		{"dead, lease not out", deadNode, 0, -time.Hour, wait - 1, false, wait},
		{"dead, lease out", deadNode, 0, -time.Hour, wait, true, 0},
		{"left, lease out", leftNode, 0, -time.Hour, wait, true, 0},
		{"suspect never lost", suspect, 0, -time.Hour, time.Hour, false, 0},
		{"new leader waits from LeaderSince", deadNode, -time.Hour, 0, wait - 1, false, wait},
		{"new leader, after wait", deadNode, -time.Hour, 0, wait, true, 0},
		{"never heard: LeaderSince only", deadNode, -1, 10 * time.Second, 10*time.Second + wait - 1, false, 10*time.Second + wait},
		{"heard after LeaderSince", deadNode, 20 * time.Second, 0, 20*time.Second + wait - 1, false, 20*time.Second + wait},
		// A client renews for up to its contact window after its last
		// confirmed beat: its margin is the client one.
		{"dead client, server's wait is not enough", deadClient, 0, -time.Hour, wait, false, clientWait},
		{"dead client, lease and client margin out", deadClient, 0, -time.Hour, clientWait, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &Snapshot{Nodes: []fsm.Node{tt.n},
				Live:        []fsm.Attempt{liveAttempt("j1", tt.n.Name, 1, 1, 7), liveAttempt("j0", tt.n.Name, 1, 1, 9)},
				LastHeard:   map[string]time.Time{},
				LeaderSince: t0.Add(tt.leaderSince)}
			if tt.heard != -1 {
				snap.LastHeard[tt.n.Name] = t0.Add(tt.heard)
			}
			dec := Plan(snap, t0.Add(tt.now), cfg)
			d := decode(t, dec)
			if got := len(d.lost) > 0; got != tt.lost {
				t.Fatalf("lost = %v, want %v", got, tt.lost)
			}
			if tt.lost {
				ml := d.lost[0]
				want := []fsm.AttemptRef{{JobID: "j0", Attempt: 1, FencingToken: 9}, {JobID: "j1", Attempt: 1, FencingToken: 7}}
				if ml.Node != tt.n.Name || !slices.Equal(ml.Attempts, want) || ml.Reason != "node "+string(tt.n.Gossip) {
					t.Fatalf("mark lost %+v", ml)
				}
			}
			var wantWake time.Time
			if tt.wake != 0 {
				wantWake = t0.Add(tt.wake)
			}
			if !dec.NextWake.Equal(wantWake) {
				t.Fatalf("next wake %v, want %v", dec.NextWake, wantWake)
			}
		})
	}
}

func TestPlanAttemptsOnRemovedNode(t *testing.T) {
	snap := &Snapshot{Live: []fsm.Attempt{liveAttempt("j", "gone", 1, 1, 3)}, LeaderSince: t0}
	if d := decode(t, Plan(snap, t0.Add(time.Second), testConfig())); len(d.lost) != 0 {
		t.Fatal("lost before the lease ran out")
	}
	d := decode(t, Plan(snap, t0.Add(time.Minute), testConfig()))
	if len(d.lost) != 1 || d.lost[0].Reason != "node removed" {
		t.Fatalf("lost %+v", d.lost)
	}
}

func TestPlanDrainDeadline(t *testing.T) {
	n := node("n", 1000, 1000)
	n.Eligibility = fsm.Draining
	n.DrainDeadline = t0.Add(time.Minute)
	told := liveAttempt("told", "n", 1, 1, 4)
	told.CancelRequested = fsm.ReasonDrained
	snap := &Snapshot{Nodes: []fsm.Node{n}, Live: []fsm.Attempt{liveAttempt("a", "n", 1, 1, 3), told}}

	dec := Plan(snap, t0, testConfig())
	if len(dec.Commands) != 0 || !dec.NextWake.Equal(n.DrainDeadline) {
		t.Fatalf("before deadline: %d commands, wake %v", len(dec.Commands), dec.NextWake)
	}
	d := decode(t, Plan(snap, n.DrainDeadline, testConfig()))
	want := []fsm.AttemptRef{{JobID: "a", Attempt: 1, FencingToken: 3}}
	if len(d.stopped) != 1 || !slices.Equal(d.stopped[0].Attempts, want) || d.stopped[0].Reason != fsm.ReasonDrained {
		t.Fatalf("stopped %+v, want only the attempt not yet told", d.stopped)
	}
	// Without a deadline a drain waits for attempts to finish.
	n.DrainDeadline = time.Time{}
	snap.Nodes = []fsm.Node{n}
	if dec := Plan(snap, t0.Add(time.Hour), testConfig()); len(dec.Commands) != 0 {
		t.Fatal("stopped attempts on a drain without deadline")
	}
}

func TestPlanBatchesCommands(t *testing.T) {
	cfg := testConfig()
	cfg.BatchSize = 10
	var jobs []*fsm.Job
	for i := range 25 {
		jobs = append(jobs, job(strings.Repeat("x", i+1), 50, 1, 1))
	}
	dec := Plan(&Snapshot{Nodes: []fsm.Node{node("n", 1000, 1000)}, Pending: jobs}, t0, cfg)
	if len(dec.Commands) != 3 || dec.Stats.Placed != 25 {
		t.Fatalf("%d commands for %d placements, want 3 for 25", len(dec.Commands), dec.Stats.Placed)
	}
}

func TestPlanIsDeterministic(t *testing.T) {
	snap := randomSnapshot(newRand(7), 40, 300)
	a := Plan(snap, t0, testConfig())
	for range 5 {
		b := Plan(snap, t0, testConfig())
		if len(a.Commands) != len(b.Commands) {
			t.Fatal("command count differs")
		}
		for i := range a.Commands {
			if string(a.Commands[i].Payload) != string(b.Commands[i].Payload) {
				t.Fatalf("command %d differs", i)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.LeaseDuration = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "LeaseDuration") {
		t.Fatalf("err = %v", err)
	}
}

// On an empty homogeneous cluster bin-pack fills nodes one after another
// and spread uses a new node for every job.
func TestPlanFillPattern(t *testing.T) {
	var nodes []fsm.Node
	for i := range 40 {
		nodes = append(nodes, node(fmt.Sprintf("n%02d", i), 4000, 4096))
	}
	for _, tt := range []struct {
		placement string
		wantNodes int
	}{{"binpack", 5}, {"spread", 20}} {
		t.Run(tt.placement, func(t *testing.T) {
			var jobs []*fsm.Job
			for i := range 20 {
				j := job(fmt.Sprintf("j%02d", i), 50, 1000, 1024)
				j.Spec.Placement = tt.placement
				jobs = append(jobs, j)
			}
			d := decode(t, Plan(&Snapshot{Nodes: nodes, Pending: jobs}, t0, testConfig()))
			used := map[string]int{}
			for _, p := range d.placements {
				used[p.Node]++
			}
			if len(d.placements) != 20 || len(used) != tt.wantNodes {
				t.Fatalf("%d placements on %d nodes, want 20 on %d", len(d.placements), len(used), tt.wantNodes)
			}
		})
	}
}

func TestPlanNoLostWithoutLeaderSince(t *testing.T) {
	n := node("d", 1000, 1000)
	n.Gossip = fsm.NodeDead
	snap := &Snapshot{Nodes: []fsm.Node{n}, Live: []fsm.Attempt{liveAttempt("j", "d", 1, 1, 3)}}
	if dec := Plan(snap, t0.Add(24*time.Hour), testConfig()); len(dec.Commands) != 0 {
		t.Fatal("declared attempts lost with an unknown LeaderSince")
	}
}
