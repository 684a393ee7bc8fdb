package sched

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// fairJob is a 1-cpu job of namespace ns submitted at t0 + sec seconds.
func fairJob(id, ns string, prio int, sec int) *fsm.Job {
	j := job(id, prio, 1000, 64)
	j.Spec.Namespace = ns
	j.SubmittedAt = t0.Add(time.Duration(sec) * time.Second)
	return j
}

// flood is n jobs of ns submitted one per second from sec on.
func flood(ns string, prio, n, sec int) []*fsm.Job {
	var out []*fsm.Job
	for i := range n {
		out = append(out, fairJob(fmt.Sprintf("%s-%03d", ns, i), ns, prio, sec+i))
	}
	return out
}

// specsOf answers Snapshot.JobSpec from jobs.
func specsOf(jobs ...[]*fsm.Job) func(string) *fsm.JobSpec {
	m := map[string]*fsm.JobSpec{}
	for _, js := range jobs {
		for _, j := range js {
			m[j.ID] = &j.Spec
		}
	}
	return func(id string) *fsm.JobSpec { return m[id] }
}

// namespacesPlaced is the namespace of each placement, in order.
func namespacesPlaced(t *testing.T, d *Decision, jobs []*fsm.Job) []string {
	t.Helper()
	ns := map[string]string{}
	for _, j := range jobs {
		ns[j.ID] = fsm.NamespaceOf(j.Spec.Namespace)
	}
	var out []string
	for _, p := range decode(t, d).placements {
		out = append(out, ns[p.JobID])
	}
	return out
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func TestFairShareOrder(t *testing.T) {
	eightSlots := []fsm.Node{node("n1", 4000, 8192), node("n2", 4000, 8192)}
	cases := []struct {
		name   string
		jobs   []*fsm.Job
		shares map[string]int64
		quotas map[string]*fsm.Namespace
		live   []*fsm.Job // jobs already running (one 1-cpu attempt each, on n1)
		recent map[string]Alloc
		// want is the placements' namespaces in order; wantA/wantB only the counts.
		want         []string
		wantA, wantB int
		aging        bool // plan with the default AgingInterval
	}{
		{name: "equal shares alternate", jobs: append(flood("a", 0, 10, 0), flood("b", 0, 10, 100)...),
			shares: map[string]int64{"a": 1, "b": 1}, want: []string{"a", "b", "a", "b", "a", "b", "a", "b"}},
		{name: "3:1 gives 3:1", jobs: append(flood("a", 0, 10, 100), flood("b", 0, 10, 0)...),
			shares: map[string]int64{"a": 3, "b": 1}, wantA: 6, wantB: 2},
		{name: "a namespace alone takes every slot", jobs: flood("a", 0, 10, 0),
			shares: map[string]int64{"a": 1, "b": 3}, wantA: 8},
		{name: "a namespace without a share counts as 1", jobs: append(flood("a", 0, 10, 0), flood("", 0, 10, 100)...),
			shares: map[string]int64{"a": 1}, want: []string{"a", "default", "a", "default", "a", "default", "a", "default"}},
		{name: "priority beats fair share", jobs: append(flood("a", 0, 10, 0), flood("b", 10, 5, 100)...),
			shares: map[string]int64{"a": 1, "b": 1}, want: []string{"b", "b", "b", "b", "b", "a", "a", "a"}},
		{name: "a quota still caps", jobs: append(flood("a", 0, 10, 0), flood("b", 0, 10, 100)...),
			shares: map[string]int64{"a": 3, "b": 1}, quotas: map[string]*fsm.Namespace{"a": {Name: "a", MaxRunning: 2}},
			wantA: 2, wantB: 6},
		{name: "live allocation counts", jobs: append(flood("a", 0, 10, 0), flood("b", 0, 10, 100)...),
			shares: map[string]int64{"a": 1, "b": 1}, live: flood("a", 0, 4, -100), want: []string{"b", "b", "b", "b"}},
		{name: "recent usage counts", jobs: append(flood("a", 0, 10, 0), flood("b", 0, 10, 100)...),
			shares: map[string]int64{"a": 1, "b": 1}, recent: map[string]Alloc{"a": {CPU: 2000}},
			want: []string{"b", "b", "a", "b", "a", "b", "a", "b"}},
		// The plan runs at 10:00 (t0 + 1h). a flooded at 9:30, b floods
		// now, same spec priority and shares: a's backlog has aged 30
		// levels, but aging only lifts a job to the next priority in use
		// (there is none here), so within the level fair share decides:
		// they alternate (a first: older, equal keys). Ordering by the
		// aged priority would give a all 8 slots.
		{name: "aging does not outrank fair share within a level", jobs: append(flood("a", 0, 10, 1800), flood("b", 0, 10, 3600)...),
			shares: map[string]int64{"a": 1, "b": 1}, aging: true, want: []string{"a", "b", "a", "b", "a", "b", "a", "b"}},
		// Aging lifts a job into the next level in use: a's priority-0 jobs
		// waited an hour (effective 60), so they join b's fresh priority-50
		// jobs at level 50, where fair share decides; a's 3 are all placed.
		{name: "aging lifts a job to the next level in use", jobs: append(flood("a", 0, 3, 0), flood("b", 50, 10, 3600)...),
			shares: map[string]int64{"a": 1, "b": 1}, aging: true, want: []string{"a", "b", "a", "b", "a", "b", "b", "b"}},
		// ... but not before it has reached it: 30 minutes (effective 30)
		// leave a at level 0, below b's 50.
		{name: "aging short of the next level lifts nothing", jobs: append(flood("a", 0, 3, 1800), flood("b", 50, 10, 3600)...),
			shares: map[string]int64{"a": 1, "b": 1}, aging: true, wantB: 8},
		// Levels are the priorities in use, not every integer: a's job at
		// effective 60 (priority 0 aged an hour) and c's at effective 55
		// (priority 40 aged 15 minutes) are both at level 50 (b's), so a
		// flood of b at 50 does not keep them out: fair share spreads the
		// slots among all three.
		{name: "aged jobs of several priorities share a level", jobs: append(append(flood("a", 0, 2, 0), flood("b", 50, 10, 3600)...), flood("c", 40, 2, 2700)...),
			shares: map[string]int64{"a": 1, "b": 1, "c": 1}, aging: true, wantA: 2, wantB: 4},
		{name: "off: FIFO as before", jobs: append(flood("a", 0, 10, 0), flood("b", 0, 10, 100)...),
			wantA: 8},
		{name: "off: aging as before", jobs: append(flood("a", 0, 10, 1800), flood("b", 10, 10, 3600)...),
			aging: true, wantA: 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap := &Snapshot{Nodes: eightSlots, Pending: c.jobs, Shares: c.shares, Recent: c.recent, LeaderSince: t0.Add(-time.Hour)}
			if c.quotas != nil {
				snap.NamespaceQuotas, snap.NamespaceUsage = c.quotas, map[string]NamespaceUsage{}
			}
			for i, j := range c.live {
				snap.Live = append(snap.Live, liveAttempt(j.ID, "n1", 1000, 64, uint64(i+1)))
			}
			snap.JobSpec = specsOf(c.jobs, c.live)
			cfg := testConfig()
			if c.aging {
				cfg.AgingInterval = DefaultConfig().AgingInterval
			}
			got := namespacesPlaced(t, Plan(snap, t0.Add(time.Hour), cfg), c.jobs)
			if c.want != nil && !slices.Equal(got, c.want) {
				t.Fatalf("placed %v, want %v", got, c.want)
			}
			if c.want == nil && (count(got, "a") != c.wantA || count(got, "b") != c.wantB) {
				t.Fatalf("placed %v: %d of a, %d of b; want %d and %d", got, count(got, "a"), count(got, "b"), c.wantA, c.wantB)
			}
		})
	}
}

// TestFairKey: the key is the dominant resource share over the share.
func TestFairKey(t *testing.T) {
	c := Alloc{CPU: 10000, MemoryMB: 1000, GPUs: 0}
	if k := FairKey(Alloc{CPU: 1000, MemoryMB: 500}, Alloc{}, 1, c); k != 0.5 {
		t.Fatalf("memory-dominant key %v, want 0.5", k)
	}
	if k := FairKey(Alloc{CPU: 1000}, Alloc{CPU: 3000}, 2, c); k != 0.2 {
		t.Fatalf("live+recent over share 2: key %v, want 0.2", k)
	}
	if k := FairKey(Alloc{GPUs: 4}, Alloc{}, 1, c); k != 0 {
		t.Fatalf("a resource the cluster lacks counts nothing: key %v", k)
	}
}

// TestFairShareRecentDecay: a steady allocation held for many half-lives
// averages to itself, and halves one half-life after it stops.
func TestFairShareRecentDecay(t *testing.T) {
	h := 4 * time.Hour
	now := t0.Truncate(time.Hour).Add(17 * time.Minute)
	steady := func(stopAgo time.Duration) UsageHours {
		return func(from, to time.Time, fn func(time.Time, string, Alloc) error) error {
			for hr := from; hr.Before(to); hr = hr.Add(time.Hour) {
				if !hr.Before(now.Add(-stopAgo).Truncate(time.Hour)) {
					continue
				}
				// 1000 millicores for the whole hour, in millicore-ms.
				if err := fn(hr, "default", Alloc{CPU: 1000 * 3600_000}); err != nil {
					return err
				}
			}
			return nil
		}
	}
	got, err := RecentUsage(steady(0), now, h)
	if err != nil {
		t.Fatal(err)
	}
	if a := got[""].CPU; math.Abs(a-1000) > 60 {
		t.Fatalf("steady 1000m: recent average %.0f, want about 1000", a)
	}
	got, _ = RecentUsage(steady(h), now, h)
	if a := got[""].CPU; math.Abs(a-500) > 60 {
		t.Fatalf("stopped one half-life ago: recent average %.0f, want about 500", a)
	}
	// The loop's cache agrees with a full read, within the hour and
	// after it changes.
	var c recentCache
	for _, at := range []time.Time{now, now.Add(20 * time.Minute), now.Add(75 * time.Minute)} {
		cached, _ := c.get(steady(0), at, h)
		full, _ := RecentUsage(steady(0), at, h)
		if math.Abs(cached[""].CPU-full[""].CPU) > 1e-6 {
			t.Fatalf("at %v: cached %v, full read %v", at, cached[""].CPU, full[""].CPU)
		}
	}
}

// TestPropertyFairShareConverges: namespaces with random shares flood a
// random cluster with 1-cpu jobs arriving at random; attempts finish at
// random. Over many rounds each namespace's share of the slot-rounds
// stays within ±5 points of its normalized share, and no slot is ever
// left idle while a queued job fits.
func TestPropertyFairShareConverges(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := newRand(seed)
			var nodes []fsm.Node
			slots := 0
			for i := 0; slots < 40; i++ {
				cpus := 1 + rng.Intn(8)
				nodes = append(nodes, node(fmt.Sprintf("n%02d", i), int64(1000*cpus), 65536))
				slots += cpus
			}
			names := []string{"a", "b", "c", "d"}[:2+rng.Intn(3)]
			shares := map[string]int64{}
			var total int64
			for _, n := range names {
				shares[n] = int64(1 + rng.Intn(4))
				total += shares[n]
			}
			specs := map[string]*fsm.JobSpec{}
			var queued []*fsm.Job
			var live []fsm.Attempt
			next, sec := 0, 0
			submit := func(ns string, n int) {
				for range n {
					next++
					sec++
					j := fairJob(fmt.Sprintf("j%06d", next), ns, 0, sec)
					specs[j.ID] = &j.Spec
					queued = append(queued, j)
				}
			}
			for _, n := range names {
				submit(n, slots)
			}
			held := map[string]int{} // slot-rounds per namespace
			rounds := 0
			for round := range 400 {
				// Every job is submitted by now (one a second), and ages
				// one level a second: the backlogs differ in age by up to
				// the cap, which must not change the split (all are at
				// spec priority 0, one level).
				now := t0.Add(time.Duration(sec) * time.Second)
				snap := &Snapshot{Nodes: nodes, Pending: queued, Live: live, Shares: shares, LeaderSince: t0.Add(-time.Hour),
					JobSpec: func(id string) *fsm.JobSpec { return specs[id] }}
				cfg := testConfig()
				cfg.AgingInterval = time.Second
				d := Plan(snap, now, cfg)
				placed := map[string]bool{}
				for _, p := range decode(t, d).placements {
					placed[p.JobID] = true
					live = append(live, liveAttempt(p.JobID, p.Node, p.Resources.CPU, p.Resources.MemoryMB, uint64(len(live)+1)))
				}
				queued = slices.DeleteFunc(queued, func(j *fsm.Job) bool { return placed[j.ID] })
				// Nothing idle while a job fits: every job is 1 cpu.
				if len(queued) > 0 {
					free := map[string]int64{}
					for _, n := range nodes {
						free[n.Name] = n.Capacity.CPU
					}
					for _, a := range live {
						free[a.Node] -= a.Resources.CPU
					}
					for n, f := range free {
						if f >= 1000 {
							t.Fatalf("round %d: node %s has %dm free while %d jobs wait", round, n, f, len(queued))
						}
					}
				}
				waiting := map[string]int{}
				for _, j := range queued {
					waiting[j.Spec.Namespace]++
				}
				flooding := true
				for _, n := range names {
					flooding = flooding && waiting[n] > 0
				}
				if round >= 20 && flooding {
					rounds++
					for _, a := range live {
						held[specs[a.JobID].Namespace]++
					}
				}
				// Random finishes and random arrivals (enough to keep
				// every namespace flooding most of the time).
				live = slices.DeleteFunc(live, func(fsm.Attempt) bool { return rng.Intn(3) == 0 })
				for _, n := range names {
					if waiting[n] < slots {
						submit(n, rng.Intn(slots/2+1))
					}
				}
			}
			if rounds < 200 {
				t.Fatalf("only %d rounds with every namespace flooding", rounds)
			}
			for _, n := range names {
				got := float64(held[n]) / float64(rounds*slots)
				want := float64(shares[n]) / float64(total)
				if math.Abs(got-want) > 0.05 {
					t.Errorf("namespace %s (share %d of %d): %.3f of the slots, want %.3f ± 0.05", n, shares[n], total, got, want)
				}
			}
		})
	}
}

// TestPropertyFairShareLevelOrder: on identical 1-cpu jobs of random
// namespaces, spec priorities and ages (aging on) and identical nodes,
// Plan places exactly the order of a brute-force reference: each time the
// job with the highest level (effective priority rounded down to a spec
// priority in use), then the lowest current key of its namespace, then the
// oldest, then the lowest ID.
func TestPropertyFairShareLevelOrder(t *testing.T) {
	cfg := testConfig()
	cfg.AgingInterval = time.Minute
	now := t0.Add(3 * time.Hour)
	for seed := int64(1); seed <= 40; seed++ {
		rng := newRand(seed)
		var nodes []fsm.Node
		for i := range 1 + rng.Intn(6) {
			nodes = append(nodes, node(fmt.Sprint("n", i), 4000, 8192))
		}
		names := []string{"a", "b", "c", ""}
		shares := map[string]int64{"a": int64(1 + rng.Intn(3)), "b": int64(1 + rng.Intn(3))}
		prios := []int{0, 10, 20, 50, 80}[:1+rng.Intn(5)]
		var jobs []*fsm.Job
		for i := range 10 + rng.Intn(80) {
			j := fairJob(fmt.Sprintf("j%03d", i), names[rng.Intn(len(names))], prios[rng.Intn(len(prios))], 0)
			j.SubmittedAt = now.Add(-time.Duration(rng.Intn(120*60)) * time.Second)
			jobs = append(jobs, j)
		}
		d := decode(t, Plan(&Snapshot{Nodes: nodes, Pending: jobs, Shares: shares, LeaderSince: t0, JobSpec: specsOf(jobs)}, now, cfg))
		var got []string
		for _, p := range d.placements {
			got = append(got, p.JobID)
		}
		// The reference.
		inUse := map[int]bool{}
		for _, j := range jobs {
			inUse[j.Spec.Priority] = true
		}
		level := func(j *fsm.Job) int {
			eff, l := EffectivePriority(j, now, cfg), math.MinInt
			for p := range inUse {
				if p <= eff && p > l {
					l = p
				}
			}
			return l
		}
		capacity := Capacity(nodes)
		live := map[string]*Alloc{}
		key := func(ns string) float64 {
			if live[ns] == nil {
				live[ns] = &Alloc{}
			}
			return FairKey(*live[ns], Alloc{}, shares[ns], capacity)
		}
		left := slices.Clone(jobs)
		var want []string
		for range min(len(jobs), 4*len(nodes)) {
			best := 0
			for i, j := range left[1:] {
				b := left[best]
				if lj, lb := level(j), level(b); lj != lb {
					if lj > lb {
						best = i + 1
					}
					continue
				}
				if kj, kb := key(j.Spec.Namespace), key(b.Spec.Namespace); kj != kb {
					if kj < kb {
						best = i + 1
					}
					continue
				}
				if c := j.SubmittedAt.Compare(b.SubmittedAt); c < 0 || c == 0 && j.ID < b.ID {
					best = i + 1
				}
			}
			j := left[best]
			want = append(want, j.ID)
			key(j.Spec.Namespace)
			live[j.Spec.Namespace].add(&j.Spec.Resources, 1)
			left = slices.Delete(left, best, best+1)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: placed\n%v\nwant\n%v", seed, got, want)
		}
	}
}

// TestFairShareFromState: on a real state, a namespace whose finished
// attempts are in the usage records yields to one that has used nothing;
// NamespaceShares reports the same factors Plan orders by.
func TestFairShareFromState(t *testing.T) {
	e := newLoopEnv(t)
	e.apply(fsm.CmdStartUsage, &fsm.StartUsage{})
	e.apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node("n1", 2000, 4096)})
	e.apply(fsm.CmdSetNamespace, &fsm.SetNamespace{Namespace: fsm.Namespace{Name: "a", Share: 1}})
	e.apply(fsm.CmdSetNamespace, &fsm.SetNamespace{Namespace: fsm.Namespace{Name: "b", Share: 1}})
	// Namespace a ran two 1-cpu jobs for two hours.
	submit := func(prefix, ns string, n int) {
		p := &fsm.SubmitJobs{}
		for i := range n {
			p.Jobs = append(p.Jobs, fsm.NewJob{ID: fmt.Sprintf("%s%02d", prefix, i),
				Spec: fsm.JobSpec{Command: []string{"true"}, Namespace: ns, Resources: fsm.Resources{CPU: 1000, MemoryMB: 64}}})
		}
		e.apply(fsm.CmdSubmitJobs, p)
	}
	submit("01A", "a", 2)
	plan := func() *Decision {
		var d *Decision
		if err := e.f.View(func(tx *fsm.Tx) error {
			snap, err := LoadSnapshot(tx, e.clk.Now())
			if err != nil {
				return err
			}
			snap.LeaderSince = t0.Add(-time.Hour)
			if snap.Recent, err = RecentUsage(UsageHoursOf(tx), e.clk.Now(), time.Hour); err != nil {
				return err
			}
			d = Plan(snap, e.clk.Now(), testConfig())
			return d.Err
		}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, cmd := range plan().Commands {
		if _, err := e.r.Apply(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	started := e.clk.Now()
	e.clk.Advance(2 * time.Hour)
	for _, id := range []string{"01A00", "01A01"} {
		a := e.attempt(id, 1)
		e.apply(fsm.CmdReport, &fsm.ReportAttempt{JobID: id, Attempt: 1, FencingToken: a.FencingToken, Node: a.Node,
			State: fsm.AttemptSucceeded, StartedAt: started, FinishedAt: e.clk.Now()})
	}
	// Now both flood: b goes first (a's recent use), then they alternate
	// once b's live allocation catches up.
	e.clk.Advance(time.Minute)
	submit("01B", "a", 4)
	submit("01C", "b", 4)
	d := plan()
	var got []string
	for _, p := range decode(t, d).placements {
		got = append(got, p.JobID[:3])
	}
	if !slices.Equal(got, []string{"01C", "01C"}) {
		t.Fatalf("placed %v, want b's two jobs first (a used the cluster for two hours)", got)
	}
	var rep *ShareReport
	if err := e.f.View(func(tx *fsm.Tx) error {
		var err error
		rep, err = NamespaceShares(tx, e.clk.Now(), time.Hour)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !rep.Enabled || len(rep.Rows) != 2 || rep.Rows[0].Namespace != "a" || rep.Rows[0].Key <= rep.Rows[1].Key || rep.Rows[0].RecentDominant < 0.5 {
		t.Fatalf("report %+v: want a (recent use about 3/4 of the cluster) above b", rep)
	}
}

// BenchmarkPlanFairShare is a whole plan of 20,000 jobs of 8 namespaces on
// 1,000 nodes with fair share off and on: what ordering by the namespaces'
// keys costs.
//
//	go test ./sched -run XXX -bench PlanFairShare -benchtime 5x
func BenchmarkPlanFairShare(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprint("on=", on), func(b *testing.B) {
			s := scaleSnapshot(newRand(1), 1000, 20000)
			specs := map[string]*fsm.JobSpec{}
			for i, j := range s.Pending {
				j.Spec.Namespace = fmt.Sprintf("ns%d", i%8)
				specs[j.ID] = &j.Spec
			}
			s.JobSpec = func(id string) *fsm.JobSpec { return specs[id] }
			if on {
				s.Shares = map[string]int64{"ns0": 3, "ns1": 2}
			}
			cfg := testConfig()
			placed := 0
			b.ResetTimer()
			for b.Loop() {
				placed += Plan(s, t0, cfg).Stats.Placed
			}
			b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
		})
	}
}
