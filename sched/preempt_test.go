package sched

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// preemptSnap builds a snapshot whose live attempts' jobs have the given
// priorities (specs looked up through Snapshot.JobSpec).
type liveJob struct {
	id       string
	node     string
	prio     int
	cpu      int64
	started  time.Duration // before t0
	optOut   bool
	stopping string
}

func preemptSnap(nodes []fsm.Node, live []liveJob, pending ...*fsm.Job) *Snapshot {
	specs := map[string]*fsm.JobSpec{}
	s := &Snapshot{Nodes: nodes, Pending: pending}
	for i, l := range live {
		a := liveAttempt(l.id, l.node, l.cpu, 256, uint64(100+i))
		a.StartedAt = t0.Add(-l.started)
		a.CancelRequested = l.stopping
		s.Live = append(s.Live, a)
		sp := &fsm.JobSpec{Priority: l.prio}
		if l.optOut {
			no := false
			sp.Preemptible = &no
		}
		specs[l.id] = sp
	}
	s.JobSpec = func(id string) *fsm.JobSpec { return specs[id] }
	return s
}

func victims(d decoded) (by string, ids []string) {
	for _, st := range d.stopped {
		if st.Reason != fsm.ReasonPreempted {
			continue
		}
		by = st.By
		for _, r := range st.Attempts {
			ids = append(ids, r.JobID)
		}
	}
	return by, ids
}

func TestPreemptOneVictimMostRecent(t *testing.T) {
	s := preemptSnap([]fsm.Node{node("a", 2000, 4096)}, []liveJob{
		{id: "old", node: "a", prio: 10, cpu: 1000, started: time.Hour},
		{id: "new", node: "a", prio: 10, cpu: 1000, started: time.Minute},
	}, job("hi", 90, 1000, 256))
	d := decode(t, Plan(s, t0, testConfig()))
	by, ids := victims(d)
	if by != "hi" || strings.Join(ids, ",") != "new" {
		t.Fatalf("preempted %v by %q, want the most recently started one", ids, by)
	}
	if len(d.placements) != 0 || !strings.Contains(d.reasons["hi"], "preempting 1 attempts on a") {
		t.Fatalf("placements %v reason %q: the preemptor waits for its victim", d.placements, d.reasons["hi"])
	}
}

func TestPreemptLowestPriorityAndSmallestSet(t *testing.T) {
	// Two small victims would do, but one larger attempt alone is enough:
	// the smallest set wins over recency.
	s := preemptSnap([]fsm.Node{node("a", 4000, 4096)}, []liveJob{
		{id: "big", node: "a", prio: 20, cpu: 2000, started: time.Hour},
		{id: "s1", node: "a", prio: 10, cpu: 1000, started: time.Minute},
		{id: "s2", node: "a", prio: 10, cpu: 1000, started: 2 * time.Minute},
	}, job("hi", 90, 2000, 256))
	_, ids := victims(decode(t, Plan(s, t0, testConfig())))
	if strings.Join(ids, ",") != "big" {
		t.Fatalf("victims %v, want the single attempt that frees enough", ids)
	}
	// With two equal single choices, the lower priority goes.
	s = preemptSnap([]fsm.Node{node("a", 2000, 4096)}, []liveJob{
		{id: "p20", node: "a", prio: 20, cpu: 1000, started: time.Minute},
		{id: "p5", node: "a", prio: 5, cpu: 1000, started: time.Hour},
	}, job("hi", 90, 1000, 256))
	if _, ids := victims(decode(t, Plan(s, t0, testConfig()))); strings.Join(ids, ",") != "p5" {
		t.Fatalf("victims %v, want the lowest priority", ids)
	}
}

func TestPreemptNeverEqualHigherOrOptedOut(t *testing.T) {
	cases := []struct {
		name string
		live liveJob
		prio int
	}{
		{"equal priority", liveJob{id: "v", node: "a", prio: 40, cpu: 2000}, 40},
		{"higher priority", liveJob{id: "v", node: "a", prio: 45, cpu: 2000}, 40},
		{"inside the margin", liveJob{id: "v", node: "a", prio: 35, cpu: 2000}, 40},
		{"not preemptible by default (priority 50)", liveJob{id: "v", node: "a", prio: 50, cpu: 2000}, 100},
		{"opted out", liveJob{id: "v", node: "a", prio: 10, cpu: 2000, optOut: true}, 90},
		{"already stopping", liveJob{id: "v", node: "a", prio: 10, cpu: 1000, stopping: fsm.ReasonDrained}, 90},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := preemptSnap([]fsm.Node{node("a", 2000, 4096)}, []liveJob{tc.live, {id: "other", node: "a", prio: 90, cpu: 1000, optOut: true}}, job("hi", tc.prio, 2000, 256))
			if tc.live.stopping != "" {
				s.Pending[0].Spec.Resources.CPU = 1000
			}
			d := decode(t, Plan(s, t0, testConfig()))
			if _, ids := victims(d); len(ids) != 0 {
				t.Fatalf("preempted %v", ids)
			}
		})
	}
	// Margin 0 still never preempts an equal priority.
	cfg := testConfig()
	cfg.PreemptionMargin = 0
	s := preemptSnap([]fsm.Node{node("a", 1000, 4096)}, []liveJob{{id: "v", node: "a", prio: 30, cpu: 1000}}, job("hi", 30, 1000, 256))
	if _, ids := victims(decode(t, Plan(s, t0, cfg))); len(ids) != 0 {
		t.Fatalf("margin 0 preempted an equal priority: %v", ids)
	}
}

func TestPreemptWaitsForStoppingVictims(t *testing.T) {
	s := preemptSnap([]fsm.Node{node("a", 2000, 4096)}, []liveJob{
		{id: "v1", node: "a", prio: 10, cpu: 1000, stopping: fsm.ReasonPreempted},
		{id: "v2", node: "a", prio: 10, cpu: 1000},
	}, job("hi", 90, 1000, 256))
	d := decode(t, Plan(s, t0, testConfig()))
	if _, ids := victims(d); len(ids) != 0 {
		t.Fatalf("preempted %v although a victim is stopping", ids)
	}
	if !strings.Contains(d.reasons["hi"], "waiting for 1 stopping") {
		t.Fatalf("reason %q", d.reasons["hi"])
	}
}

func TestPreemptForGangOnNNodes(t *testing.T) {
	nodes := []fsm.Node{node("a", 1000, 4096), node("b", 1000, 4096), node("c", 1000, 4096)}
	s := preemptSnap(nodes, []liveJob{
		{id: "va", node: "a", prio: 10, cpu: 1000},
		{id: "vb", node: "b", prio: 20, cpu: 1000},
		{id: "vc", node: "c", prio: 5, cpu: 1000},
	}, gangJob("g", 90, 2, 1000, 256))
	by, ids := victims(decode(t, Plan(s, t0, testConfig())))
	if by != "g" || strings.Join(ids, ",") != "vc,va" {
		t.Fatalf("victims %v by %q, want the two lowest priorities (on two nodes)", ids, by)
	}
	// A preemptor does not steal another preemptor's victims in one plan.
	s = preemptSnap(nodes[:1], []liveJob{{id: "va", node: "a", prio: 10, cpu: 1000}},
		job("h1", 90, 1000, 256), job("h2", 80, 1000, 256))
	if _, ids := victims(decode(t, Plan(s, t0, testConfig()))); len(ids) != 1 {
		t.Fatalf("victims %v, want one", ids)
	}
}

// Regression (jepsen gang-kill-random): a gang preempting on one node
// counts on the free room of the others; a lower-priority job examined
// later in the same plan must not take it, nor the room of a node whose
// victims are stopping. Before the fix the queued low job went to b, the
// gang preempted again once a's victim ended, and the victims cycled.
func TestPreemptorKeepsItsRoomInThePlan(t *testing.T) {
	nodes := []fsm.Node{node("a", 2000, 4096), node("b", 2000, 4096), node("c", 2000, 4096)}
	s := preemptSnap(nodes, []liveJob{
		{id: "la1", node: "a", prio: 10, cpu: 1000},
		{id: "la2", node: "a", prio: 10, cpu: 1000, started: time.Hour},
		{id: "lb", node: "b", prio: 10, cpu: 1000},
		{id: "gc", node: "c", prio: 60, cpu: 1000},
	}, gangJob("g", 60, 3, 1000, 256), job("low", 10, 1000, 256))
	d := decode(t, Plan(s, t0, testConfig()))
	if by, ids := victims(d); by != "g" || len(ids) != 1 {
		t.Fatalf("victims %v by %q, want one on a", ids, by)
	}
	if len(d.placements) != 0 {
		t.Fatalf("placed %+v in the room the gang waits for", d.placements)
	}
	// The victim is stopping: the gang waits, and its room stays its.
	s = preemptSnap(nodes, []liveJob{
		{id: "la1", node: "a", prio: 10, cpu: 1000, stopping: fsm.ReasonPreempted},
		{id: "la2", node: "a", prio: 10, cpu: 1000, started: time.Hour},
		{id: "lb", node: "b", prio: 10, cpu: 1000},
		{id: "gc", node: "c", prio: 60, cpu: 1000},
	}, gangJob("g", 60, 3, 1000, 256), job("low", 10, 1000, 256))
	d = decode(t, Plan(s, t0, testConfig()))
	if _, ids := victims(d); len(ids) != 0 || len(d.placements) != 0 || !strings.Contains(d.reasons["g"], "waiting for 1 stopping") {
		t.Fatalf("victims %v placements %+v reason %q: want the gang waiting and nothing placed", ids, d.placements, d.reasons["g"])
	}
}

func TestConfigPreemptionMargin(t *testing.T) {
	for _, m := range []int{-1, 101} {
		c := DefaultConfig()
		c.PreemptionMargin = m
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "PreemptionMargin") {
			t.Fatalf("margin %d: %v", m, err)
		}
	}
}

// Over random clusters: every victim is preemptible, of a priority at
// least the margin below its preemptor's, on a node where the preemptor
// then fits, and the set is minimal (the preemptor fits without none of
// them would be wrong: removing any one victim leaves it not fitting).
func TestPreemptPropertyRandomClusters(t *testing.T) {
	cfg := testConfig()
	total := 0
	defer func() {
		if total == 0 {
			t.Fatal("no seed preempted anything: the property was never exercised")
		}
	}()
	for seed := int64(1); seed <= 100; seed++ {
		rng := newRand(seed)
		var nodes []fsm.Node
		var live []liveJob
		for i := range 1 + rng.Intn(8) {
			n := node(fmt.Sprintf("n%d", i), int64(1000*(1+rng.Intn(4))), 8192)
			nodes = append(nodes, n)
			free := n.Capacity.CPU
			for k := 0; free > 0; k++ {
				c := min(free, int64(250*(1+rng.Intn(8))))
				free -= c
				live = append(live, liveJob{id: fmt.Sprintf("l%d-%d", i, k), node: n.Name, prio: rng.Intn(100), cpu: c,
					started: time.Duration(rng.Intn(3600)) * time.Second, optOut: rng.Intn(5) == 0})
			}
		}
		var pending []*fsm.Job
		for i := range 1 + rng.Intn(4) {
			j := job(fmt.Sprintf("p%d", i), rng.Intn(101), int64(250*(1+rng.Intn(8))), 256)
			if rng.Intn(4) == 0 {
				j.Spec.Gang = &fsm.GangSpec{Size: 2 + rng.Intn(2)}
			}
			pending = append(pending, j)
		}
		s := preemptSnap(nodes, live, pending...)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			d := decode(t, Plan(s, t0, cfg))
			jobs := map[string]*fsm.Job{}
			for _, j := range pending {
				jobs[j.ID] = j
			}
			seen := map[string]bool{}
			total += len(d.stopped)
			for _, st := range d.stopped {
				pre := jobs[st.By]
				if pre == nil {
					t.Fatalf("stop by unknown job %q", st.By)
				}
				perNode := map[string][]string{}
				for _, r := range st.Attempts {
					if seen[r.JobID] {
						t.Fatalf("%s preempted twice", r.JobID)
					}
					seen[r.JobID] = true
					v := s.JobSpec(r.JobID)
					if !v.IsPreemptible() || pre.Spec.Priority-v.Priority < max(cfg.PreemptionMargin, 1) {
						t.Fatalf("%s (prio %d, preemptible %v) preempted by %s (prio %d)", r.JobID, v.Priority, v.IsPreemptible(), pre.ID, pre.Spec.Priority)
					}
					for _, l := range live {
						if l.id == r.JobID {
							perNode[l.node] = append(perNode[l.node], l.id)
						}
					}
				}
				req := cfg.request(&pre.Spec.Resources)
				for nodeName, ids := range perNode {
					fitsWithout := func(skip string) bool {
						var used int64
						for _, l := range live {
							if l.node == nodeName && (!contains(ids, l.id) || l.id == skip) {
								used += l.cpu
							}
						}
						for _, n := range nodes {
							if n.Name == nodeName {
								return n.Capacity.CPU-used >= req.CPU
							}
						}
						return false
					}
					if !fitsWithout("") {
						t.Fatalf("%s does not fit on %s after preempting %v", pre.ID, nodeName, ids)
					}
					for _, id := range ids {
						if fitsWithout(id) {
							t.Fatalf("%s fits on %s without preempting %s: %v is not minimal", pre.ID, nodeName, id, ids)
						}
					}
				}
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
