package fsm

import (
	"fmt"
	"testing"
	"time"
)

// TestListJobs pages newest first with filters.
func TestListJobs(t *testing.T) {
	h := newHarness(t)
	var p SubmitJobs
	for i := range 25 {
		team := "a"
		if i%2 == 1 {
			team = "b"
		}
		p.Jobs = append(p.Jobs, NewJob{ID: jobID(i), Spec: JobSpec{Name: fmt.Sprintf("n%02d", i), Labels: map[string]string{"team": team}}})
	}
	h.must(CmdSubmitJobs, p)
	h.must(CmdCancelJob, CancelJob{JobID: jobID(3)})
	h.must(CmdCancelJob, CancelJob{JobID: jobID(7)})

	collect := func(q JobQuery) []string {
		var ids []string
		for page := 0; ; page++ {
			jobs, next, err := h.f.ListJobs(q)
			if err != nil {
				t.Fatalf("list %+v: %v", q, err)
			}
			if q.Limit > 0 && len(jobs) > q.Limit {
				t.Fatalf("page of %d > limit %d", len(jobs), q.Limit)
			}
			for _, j := range jobs {
				ids = append(ids, j.ID)
			}
			if next == "" {
				return ids
			}
			q.Cursor = next
			if page > 100 {
				t.Fatalf("cursor does not advance")
			}
		}
	}
	sel, err := ParseLabelSelector("team=b")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    JobQuery
		want []int
	}{
		{"all, pages of 4", JobQuery{Limit: 4}, seq(24, 0)},
		{"by state", JobQuery{State: JobCancelled, Limit: 1}, []int{7, 3}},
		{"queued with label", JobQuery{State: JobQueued, Labels: sel, Limit: 3}, []int{23, 21, 19, 17, 15, 13, 11, 9, 5, 1}},
		{"name prefix", JobQuery{NamePrefix: "n1"}, seq(19, 10)},
		{"state with no jobs", JobQuery{State: JobFailed}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := collect(tc.q)
			var want []string
			for _, i := range tc.want {
				want = append(want, jobID(i))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got %v\nwant %v", got, want)
			}
		})
	}
	if _, _, err := h.f.ListJobs(JobQuery{Cursor: "!!"}); err == nil {
		t.Errorf("bad cursor accepted")
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i >= to; i-- {
		out = append(out, i)
	}
	return out
}

// TestWatchAndSubscribe: watchers wake after commits; subscribers get
// typed events; a slow subscriber is flagged, never blocks Apply.
func TestWatchAndSubscribe(t *testing.T) {
	h := newHarness(t)
	w, stop := h.f.Watch()
	defer stop()
	sub := h.f.Subscribe(2)
	defer sub.Close()
	h.addNode("n1")
	h.submit("01A")
	select {
	case <-w:
	case <-time.After(10 * time.Second):
		t.Fatal("watch not signalled")
	}
	e1, e2 := <-sub.C(), <-sub.C()
	if e1.Type != EventNode || e1.Node != "n1" || e2.Type != EventJob || e2.JobID != "01A" || e2.State != string(JobQueued) || e2.Index != h.idx || !e2.At.Equal(t0) {
		t.Errorf("events %+v %+v", e1, e2)
	}
	if sub.Lagged() {
		t.Errorf("lagged without drops")
	}
	// Overflow the buffer of 2: Apply must not block.
	h.submit("01B", "01C", "01D")
	if !sub.Lagged() {
		t.Errorf("drop not flagged")
	}
	// Close ends delivery.
	if err := h.f.Close(); err != nil {
		t.Fatal(err)
	}
	for range sub.C() {
	}
	if _, ok := <-w; ok {
		// drained the pending signal; the next receive sees the close
		if _, ok := <-w; ok {
			t.Errorf("watch channel not closed")
		}
	}
}

// TestNodes covers UpsertNode and SetNodeState field ownership.
func TestNodes(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.must(CmdNodeState, SetNodeState{Name: "n1", Eligibility: Draining, DrainDeadline: t0.Add(time.Hour), Gossip: NodeSuspect})
	h.now = t0.Add(time.Minute)
	// The agent re-announces itself: capacity changes, leader-owned fields stay.
	h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: "n1", Capacity: Resources{CPU: 1}, Eligibility: Eligible}})
	var n *Node
	if err := h.f.View(func(tx *Tx) (err error) { n, err = tx.Node("n1"); return err }); err != nil {
		t.Fatal(err)
	}
	if n.Eligibility != Draining || !n.DrainDeadline.Equal(t0.Add(time.Hour)) || n.Gossip != NodeAlive || n.Capacity.CPU != 1 || !n.StateChangedAt.Equal(h.now) {
		t.Errorf("node after upsert = %+v", n)
	}
	// Draining nodes get no placements.
	h.submit("01A")
	if r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: "01A", Node: "n1"}, {JobID: "01A", Node: "nope"}}}); len(r.Skipped) != 1 {
		t.Errorf("skipped = %v", r.Skipped)
	}
	h.must(CmdNodeState, SetNodeState{Name: "n1", Eligibility: Eligible})
	h.place("01A", "n1")
	// A job placed twice in one entry gets one attempt.
	h.submit("01B")
	r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: "01B", Node: "n1"}, {JobID: "01B", Node: "n1"}}})
	if len(r.Skipped) != 1 || h.job("01B").Attempts != 1 {
		t.Errorf("double placement: skipped %v attempts %d", r.Skipped, h.job("01B").Attempts)
	}
	var live []Attempt
	_ = h.f.View(func(tx *Tx) error {
		return tx.LiveAttemptsOnNode("n1", func(a *Attempt) bool { live = append(live, *a); return true })
	})
	if len(live) != 2 {
		t.Errorf("live on n1 = %v", live)
	}
	h.must(CmdInit, InitCluster{ClusterID: "c1"})
	h.must(CmdInit, InitCluster{ClusterID: "c2"})
	h.must(CmdSetQueue, SetQueue{Name: "gpu", MaxRunning: 2})
	_ = h.f.View(func(tx *Tx) error {
		q, _ := tx.Queues()
		if tx.ClusterID() != "c1" || q["gpu"] != 2 {
			t.Errorf("cluster %q queues %v", tx.ClusterID(), q)
		}
		return nil
	})
	checkIndexes(t, h.f)
}

// TestStopAttempts: a drain stop requeues without counting; a user cancel
// arriving meanwhile wins.
func TestStopAttempts(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submit("01A", "01B")
	ta, tb := h.place("01A", "n1"), h.place("01B", "n1")
	h.must(CmdStopAttempts, StopAttempts{Reason: ReasonDrained, Attempts: []AttemptRef{{JobID: "01A", Attempt: 1, FencingToken: ta}, {JobID: "01B", Attempt: 1, FencingToken: tb}}})
	h.must(CmdCancelJob, CancelJob{JobID: "01B"})
	h.must(CmdReport, ReportAttempt{JobID: "01A", Attempt: 1, FencingToken: ta, State: AttemptKilled})
	h.must(CmdReport, ReportAttempt{JobID: "01B", Attempt: 1, FencingToken: tb, State: AttemptKilled})
	if a, b := h.job("01A"), h.job("01B"); a.State != JobQueued || a.CountedAttempts != 0 || b.State != JobCancelled {
		t.Errorf("01A %s/%d, 01B %s", a.State, a.CountedAttempts, b.State)
	}
	if r := h.apply(CmdStopAttempts, StopAttempts{Reason: "bored"}); r.Err == nil {
		t.Errorf("bad reason accepted")
	}
	checkIndexes(t, h.f)
}

// TestRetryDelay: exponential, capped, jittered within bounds, and the
// same on every call.
func TestRetryDelay(t *testing.T) {
	b := Backoff{Initial: Duration(time.Second), Multiplier: 2, Max: Duration(10 * time.Second), Jitter: 0.1}
	tests := []struct {
		n    int
		base time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {60, 10 * time.Second}}
	for _, tc := range tests {
		got := RetryDelay("01A", tc.n, b)
		lo, hi := tc.base-tc.base/10, tc.base+tc.base/10
		if got < lo || got > hi || got != RetryDelay("01A", tc.n, b) {
			t.Errorf("delay(%d) = %v, want in [%v, %v] and stable", tc.n, got, lo, hi)
		}
	}
	for _, j := range []float64{0, -1} {
		if d := RetryDelay("01A", 1, Backoff{Jitter: j}); d != DefaultBackoffInitial {
			t.Errorf("jitter %v: delay %v, want exactly %v (zero jitter means none)", j, d, DefaultBackoffInitial)
		}
	}
	jb := Backoff{Jitter: 0.2}
	if RetryDelay("01A", 1, jb) == RetryDelay("01B", 1, jb) && RetryDelay("01C", 1, jb) == RetryDelay("01D", 1, jb) {
		t.Errorf("jitter does not depend on the job")
	}
}
