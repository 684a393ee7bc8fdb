package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

type usageRow struct {
	start          time.Time
	ns, user, labs string
	u              Usage
}

func (h *harness) usage(from, to time.Time) []usageRow {
	h.t.Helper()
	var out []usageRow
	if err := h.f.View(func(tx *Tx) error {
		return tx.UsageRange(from, to, func(start time.Time, ns, user, labels string, u *Usage) error {
			out = append(out, usageRow{start, ns, user, labels, *u})
			return nil
		})
	}); err != nil {
		h.t.Fatalf("usage: %v", err)
	}
	return out
}

func (h *harness) allUsage() []usageRow {
	return h.usage(time.Unix(0, 0), h.now.Add(1000*24*time.Hour))
}

// submitUsageJob submits one job with resources, a user, labels and a submitter.
func (h *harness) submitUsageJob(id, ns, user, by string, labels map[string]string) {
	h.t.Helper()
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: id, SubmittedBy: by, Spec: JobSpec{
		Command: []string{"true"}, Namespace: ns, User: user, Labels: labels,
		Resources: Resources{CPU: 2000, MemoryMB: 1024},
	}}}})
}

// runAttempt places job id on n1, starts it at h.now and ends it after wall
// with state st, measured cpu and peak memory.
func (h *harness) runAttempt(id string, wall time.Duration, st AttemptState, cpu time.Duration, peak int64) (tok uint64) {
	h.t.Helper()
	tok = h.placeUsing(id, Resources{CPU: 2000, MemoryMB: 1024})
	num := h.job(id).Attempts
	start := h.now
	h.must(CmdReport, ReportAttempt{JobID: id, Attempt: num, FencingToken: tok, Node: "n1", State: AttemptRunning, StartedAt: start})
	h.now = h.now.Add(wall)
	h.must(CmdReport, ReportAttempt{JobID: id, Attempt: num, FencingToken: tok, Node: "n1", State: st, ExitCode: intp(0),
		StartedAt: start, FinishedAt: h.now, CPUTimeNs: cpu.Nanoseconds(), PeakMemoryB: peak})
	return tok
}

func TestUsageAccountsFinishedAttempts(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.must(CmdStartUsage, StartUsage{Labels: []string{"team"}})
	h.submitUsageJob("j1", "ml", "alice", "tok-a", map[string]string{"team": "vision", "other": "x"})
	h.submitUsageJob("j2", "", "bob", "", nil)
	tok := h.runAttempt("j1", 10*time.Second, AttemptSucceeded, 4*time.Second, 512<<20)
	h.runAttempt("j2", 2*time.Second, AttemptSucceeded, 1500*time.Millisecond, 100<<20)

	// A stale duplicate of j1's finish is refused and counts nothing.
	before := h.hash()
	r := h.apply(CmdReport, ReportAttempt{JobID: "j1", Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptSucceeded, ExitCode: intp(0), CPUTimeNs: 9e9})
	if !errors.Is(r.Err, ErrStaleToken) {
		t.Fatalf("duplicate finish: %v, want ErrStaleToken", r.Err)
	}
	if h.hash() != before {
		t.Fatal("duplicate finish changed the state")
	}

	rows := h.allUsage()
	if len(rows) != 2 {
		t.Fatalf("rows = %+v, want 2", rows)
	}
	hour := t0.Truncate(time.Hour)
	byNS := map[string]usageRow{}
	for _, r := range rows {
		if !r.start.Equal(hour) {
			t.Errorf("row %+v: start %v, want %v", r, r.start, hour)
		}
		byNS[r.ns] = r
	}
	ml := byNS["ml"]
	want := Usage{Attempts: 1, WallMs: 10000, CPUUsedMs: 4000, CPUReqMs: 20000, MemReqMiBMs: 1024 * 10000, MemUsedMiBMs: 512 * 10000, PeakMemoryB: 512 << 20}
	if ml.user != "tok-a" || ml.labs != "team=vision" || ml.u != want {
		t.Errorf("ml row = %+v, want user tok-a, labels team=vision, %+v", ml, want)
	}
	def := byNS[DefaultNamespace]
	if def.user != "bob" || def.labs != "" || def.u.CPUUsedMs != 1500 || def.u.Attempts != 1 {
		t.Errorf("default row = %+v (user falls back to the spec's)", def)
	}
}

func TestUsageNotStartedWritesNothing(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submitUsageJob("j1", "ml", "alice", "", nil)
	h.runAttempt("j1", time.Second, AttemptSucceeded, time.Second, 1<<20)
	if rows := h.allUsage(); len(rows) != 0 {
		t.Fatalf("usage before start_usage: %+v", rows)
	}
	var on bool
	_ = h.f.View(func(tx *Tx) error { _, on = tx.UsageStarted(); return nil })
	if on {
		t.Fatal("UsageStarted before start_usage")
	}
	h.must(CmdStartUsage, StartUsage{})
	_ = h.f.View(func(tx *Tx) error { _, on = tx.UsageStarted(); return nil })
	if !on {
		t.Fatal("UsageStarted false after start_usage")
	}
	// The same marker again changes nothing.
	before := h.hash()
	h.must(CmdStartUsage, StartUsage{})
	if h.hash() != before {
		t.Fatal("repeated start_usage changed the state")
	}
}

func TestUsageLostAndUnstartedAttempts(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.must(CmdStartUsage, StartUsage{})
	h.submitUsageJob("j1", "ml", "alice", "", nil)
	tok := h.placeUsing("j1", Resources{CPU: 2000, MemoryMB: 1024})
	h.must(CmdReport, ReportAttempt{JobID: "j1", Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptRunning, StartedAt: h.now})
	h.now = h.now.Add(3 * time.Second)
	h.must(CmdMarkLost, MarkLost{Node: "n1", Attempts: []AttemptRef{{JobID: "j1", Attempt: 1, FencingToken: tok}}})
	// Requeued: the next attempt never starts; its node loses it too.
	tok = h.place("j1", "n1")
	h.must(CmdMarkLost, MarkLost{Node: "n1", Attempts: []AttemptRef{{JobID: "j1", Attempt: 2, FencingToken: tok}}})
	rows := h.allUsage()
	if len(rows) != 1 || rows[0].u.Attempts != 2 || rows[0].u.WallMs != 3000 || rows[0].u.CPUReqMs != 6000 {
		t.Fatalf("rows = %+v, want 2 attempts, 3 s wall (the unstarted one adds none)", rows)
	}
}

func TestUsageBadStart(t *testing.T) {
	for name, p := range map[string]StartUsage{
		"too many": {Labels: []string{"a", "b", "c", "d", "e"}},
		"unsorted": {Labels: []string{"b", "a"}},
		"repeated": {Labels: []string{"a", "a"}},
		"comma":    {Labels: []string{"a,b"}},
		"empty":    {Labels: []string{""}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			before := h.hash()
			if r := h.apply(CmdStartUsage, p); !errors.Is(r.Err, ErrBadCommand) {
				t.Fatalf("err = %v, want ErrBadCommand", r.Err)
			}
			if h.hash() != before {
				t.Fatal("refused start_usage changed the state")
			}
		})
	}
}

func TestUsageFoldsPastBound(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.must(CmdStartUsage, StartUsage{})
	n := MaxUsageKeysPerPeriod + 3
	for i := range n {
		id := jobID(i)
		h.submitUsageJob(id, "ns", fmt.Sprintf("user%04d", i), "", nil)
		h.runAttempt(id, time.Millisecond, AttemptSucceeded, time.Millisecond, 0)
	}
	rows := h.allUsage()
	if len(rows) != MaxUsageKeysPerPeriod+1 {
		t.Fatalf("%d rows, want %d", len(rows), MaxUsageKeysPerPeriod+1)
	}
	var total int64
	other := 0
	for _, r := range rows {
		total += r.u.Attempts
		if r.labs == UsageOtherLabels {
			other++
			if r.u.Attempts != 3 || r.user != "" {
				t.Errorf("fold row %+v, want 3 attempts", r)
			}
		}
	}
	if total != int64(n) || other != 1 {
		t.Fatalf("total %d attempts (want %d), %d fold rows", total, n, other)
	}
}

func TestUsageGCRollsUpAndDrops(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.must(CmdStartUsage, StartUsage{})
	day0 := h.now
	// Three attempts on day 0 in different hours, one on day 40.
	for i := range 3 {
		id := jobID(i)
		h.submitUsageJob(id, "ns", "u", "", nil)
		h.runAttempt(id, time.Second, AttemptSucceeded, time.Second, 0)
		h.now = h.now.Add(2 * time.Hour)
	}
	h.now = day0.Add(40 * 24 * time.Hour)
	h.submitUsageJob("late", "ns", "u", "", nil)
	h.runAttempt("late", time.Second, AttemptSucceeded, time.Second, 0)
	if rows := h.allUsage(); len(rows) != 4 {
		t.Fatalf("before gc: %+v", rows)
	}
	h.must(CmdGC, GC{})
	rows := h.allUsage()
	if len(rows) != 2 || !rows[0].start.Equal(day0.Truncate(24*time.Hour)) || rows[0].u.Attempts != 3 || rows[0].u.CPUUsedMs != 3000 || rows[1].u.Attempts != 1 {
		t.Fatalf("after rollup: %+v, want one daily row of 3 and the late hour", rows)
	}
	// A second GC at the same time changes nothing.
	before := h.hash()
	h.must(CmdGC, GC{})
	if h.hash() != before {
		t.Fatal("repeated gc changed the state")
	}
	// Past the retention, day 0 goes; the later record stays.
	h.now = day0.Add(UsageRetention + 48*time.Hour)
	h.must(CmdGC, GC{})
	rows = h.allUsage()
	if len(rows) != 1 || rows[0].u.Attempts != 1 {
		t.Fatalf("after retention: %+v", rows)
	}
	// The jobs' own GC leaves usage alone.
	h.must(CmdGC, GC{Before: h.now})
	if rows := h.allUsage(); len(rows) != 1 {
		t.Fatalf("after jobs gc: %+v", rows)
	}
}

func TestUsageSurvivesSnapshotRestore(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.must(CmdStartUsage, StartUsage{Labels: []string{"team"}})
	h.submitUsageJob("j1", "ml", "alice", "", map[string]string{"team": "a"})
	h.runAttempt("j1", time.Second, AttemptSucceeded, time.Second, 0)
	h2 := newHarness(t)
	snapshotInto(t, h.f, h2.f)
	if h.hash() != h2.hash() {
		t.Fatal("restored state hashes differently")
	}
	if rows := h2.allUsage(); len(rows) != 1 || rows[0].labs != "team=a" {
		t.Fatalf("restored usage: %+v", rows)
	}
}

func TestAttemptUsageArithmetic(t *testing.T) {
	s := t0
	at := &Attempt{StartedAt: s, FinishedAt: s.Add(1500 * time.Millisecond), CPUTimeNs: 2_999_999,
		PeakMemoryB: 3 << 19, Resources: Resources{CPU: 500, MemoryMB: 10, GPUMemoryMiB: 100, Named: map[string]int64{"gpu": 2}}}
	got := AttemptUsage(at)
	want := Usage{Attempts: 1, WallMs: 1500, CPUUsedMs: 2, CPUReqMs: 750, MemReqMiBMs: 15000, MemUsedMiBMs: 2250, PeakMemoryB: 3 << 19, GPUMs: 3000, GPUMemMiBMs: 150000}
	if got != want {
		t.Fatalf("AttemptUsage = %+v, want %+v", got, want)
	}
	if mulDiv(1<<62, 1<<62, 1) != 1<<63-1 {
		t.Fatal("mulDiv does not saturate")
	}
}

// snapshotInto persists a snapshot of from and restores it into to.
func snapshotInto(t *testing.T, from, to *FSM) {
	t.Helper()
	snap, err := from.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if err := to.Restore(nopCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
}

// placeUsing places job id on n1 with resources r and returns the token.
func (h *harness) placeUsing(id string, r Resources) uint64 {
	h.t.Helper()
	res := h.must(CmdPlace, Place{Placements: []Placement{{JobID: id, Node: "n1", Resources: r}}})
	if len(res.Skipped) > 0 {
		h.t.Fatalf("place %s: skipped %v", id, res.Skipped)
	}
	return res.Index
}

// TestUsageSameAcrossBatches: accounting keeps records pending within a
// batch (flushUsage), yet replicas whose batches split the log
// differently reach the same state: across the 500-key bound, an hour
// boundary, an entry stamped back in an earlier hour, and a GC rollup.
func TestUsageSameAcrossBatches(t *testing.T) {
	h := newHarness(t)
	h.recording = true
	h.addNode("n1")
	h.must(CmdStartUsage, StartUsage{Labels: []string{"team"}})
	hour := h.now.Truncate(time.Hour)
	run := func(i int, user string) {
		id := jobID(i)
		h.submitUsageJob(id, fmt.Sprintf("ns%d", i%2), user, "", map[string]string{"team": fmt.Sprint(i % 3)})
		h.runAttempt(id, time.Millisecond, AttemptSucceeded, time.Millisecond, 1<<20)
	}
	i := 0
	for ; i < MaxUsageKeysPerPeriod+5; i++ {
		run(i, fmt.Sprintf("user%04d", i))
	}
	h.now = hour.Add(90 * time.Minute)
	for range 5 {
		run(i, "next-hour")
		i++
	}
	h.now = hour.Add(10 * time.Minute) // stamped back in the first hour: folded
	run(i, "late")
	i++
	h.now = hour.Add(40 * 24 * time.Hour)
	run(i, "before-gc")
	i++
	h.must(CmdGC, GC{})
	run(i, "after-gc")
	want := h.hash()
	var folded int64
	for _, r := range h.allUsage() {
		if r.labs == UsageOtherLabels {
			folded += r.u.Attempts
		}
	}
	// The 5 past the bound and the late one, and more once GC rolls the
	// first hours into their day's records (past the bound again).
	if folded < 6 {
		t.Fatalf("%d attempts folded, want at least 6: the test no longer crosses the bound", folded)
	}
	for _, size := range []int{1, 7, 64, len(h.log)} {
		other := newHarness(t)
		for j := 0; j < len(h.log); j += size {
			for k, out := range other.f.ApplyBatch(h.log[j:min(j+size, len(h.log))]) {
				if r := out.(*Result); r.Err != nil {
					t.Fatalf("batches of %d: entry %d: %v", size, j+k, r.Err)
				}
			}
		}
		if got := other.hash(); got != want {
			t.Fatalf("batches of %d: state hash %s, want %s (one entry a batch)", size, got, want)
		}
	}
}
