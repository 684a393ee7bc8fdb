package exec

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
	"golang.org/x/sys/unix"
)

func TestParseRunnable(t *testing.T) {
	for in, want := range map[string]int{
		"0.52 0.58 0.59 3/467 1234\n":   3,
		"43.84 58.30 40.29 861/1556 99": 861,
	} {
		if n, err := parseRunnable([]byte(in)); err != nil || n != want {
			t.Errorf("parseRunnable(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"", "0.5 0.5 0.5", "0.5 0.5 0.5 12 99", "0.5 0.5 0.5 x/3 9"} {
		if n, err := parseRunnable([]byte(in)); err == nil {
			t.Errorf("parseRunnable(%q) = %d, want an error", in, n)
		}
	}
	if n, err := hostRunnable(); err != nil || n < 1 {
		t.Errorf("hostRunnable() = %d, %v: this very test is runnable", n, err)
	}
}

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-1": 2, "0-3,8-11": 8, "0,2,4": 3, "": 0, "3-1": 0, "a": 0, "0-": 0} {
		if n := countCPUList(in); n != want {
			t.Errorf("countCPUList(%q) = %d, want %d", in, n, want)
		}
	}
	if n := hostCPUs(); n < 1 {
		t.Errorf("hostCPUs() = %d", n)
	}
}

// claimWorker is a worker with only what claimSupervisor reads: a pool,
// spawn slots and a host whose saturation the test sets.
func claimWorker(slots int, saturated *atomic.Bool) *Worker {
	return &Worker{
		cfg:        WorkerConfig{MaxIdleSupervisors: 4},
		pool:       newSupervisorPool(4),
		spawnSlots: make(chan struct{}, slots),
		saturated:  saturated.Load,
	}
}

// idleSpare is a pool entry whose other end the test holds.
func idleSpare(t *testing.T) *spare {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[1]) })
	f := os.NewFile(uintptr(fds[0]), "ctl")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &spare{conn: c.(*net.UnixConn), exited: make(chan struct{})}
}

// busyOnSaturatedHost is a claim worker on a saturated host with one claim
// taken: with nothing busy yet, that first claim is a spawn.
func busyOnSaturatedHost(t *testing.T) (*Worker, *atomic.Bool) {
	sat := new(atomic.Bool)
	sat.Store(true)
	w := claimWorker(4, sat)
	if c, ok := w.claimSupervisor(context.Background()); !ok || !c.spawn {
		t.Fatalf("with nothing busy, claim = %+v, %v; want a spawn", c, ok)
	}
	return w, sat
}

type claimResult struct {
	c  supervisorClaim
	ok bool
}

func claimAsync(w *Worker) <-chan claimResult {
	ch := make(chan claimResult, 1)
	go func() {
		c, ok := w.claimSupervisor(context.Background())
		ch <- claimResult{c, ok}
	}()
	return ch
}

// TestClaimBoundsSpawns: with no idle supervisor, at most spawnSlots starts
// hold the right to start a process; the next one waits until a slot is
// given back, or takes a supervisor that came back meanwhile.
func TestClaimBoundsSpawns(t *testing.T) {
	var sat atomic.Bool
	w := claimWorker(2, &sat)
	var held []supervisorClaim
	for range 2 {
		c, ok := w.claimSupervisor(context.Background())
		if !ok || !c.spawn || c.s != nil {
			t.Fatalf("claim %d = %+v, %v; want a spawn", len(held), c, ok)
		}
		held = append(held, c)
	}
	third := claimAsync(w)
	w.release(held[0]) // the start failed before it forked
	if r := <-third; !r.ok || !r.c.spawn {
		t.Fatalf("third claim = %+v; want the freed spawn slot", r)
	}
	fourth := claimAsync(w)
	s := idleSpare(t)
	if !w.pool.put(s, false) {
		t.Fatal("pool refused a supervisor")
	}
	if r := <-fourth; !r.ok || r.c.s != s {
		t.Fatalf("fourth claim = %+v; want the supervisor put back", r)
	}
	if n := w.busy.Load(); n != 3 {
		t.Errorf("busy = %d, want 3 (two spawns and one supervisor claimed)", n)
	}
}

// TestClaimOnSaturatedHostWaitsForBusySupervisor: on a saturated host a
// start with a free spawn slot still waits for one of the node's busy
// supervisors; on a calm host, or with none busy, it spawns at once; and a
// wait that sees no supervisor back within RecycleWait spawns anyway.
func TestClaimOnSaturatedHostWaitsForBusySupervisor(t *testing.T) {
	w, sat := busyOnSaturatedHost(t)
	waiting := claimAsync(w)
	waitFor(t, waitShort, "the start to wait", func() bool { return w.waitedStarts.Load() == 1 })
	s := idleSpare(t)
	w.pool.put(s, true)
	if r := <-waiting; !r.ok || r.c.s != s {
		t.Fatalf("claim = %+v; want the busy supervisor back from its attempt", r)
	}
	sat.Store(false)
	if c, ok := w.claimSupervisor(context.Background()); !ok || !c.spawn {
		t.Fatalf("on a calm host, claim = %+v, %v; want a spawn", c, ok)
	}
	sat.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c, ok := w.claimSupervisor(ctx); ok {
		t.Fatalf("claim after the worker stopped = %+v", c)
	}
	before := w.busy.Load()
	if c, ok := w.claimSupervisor(context.Background()); !ok || !c.spawn {
		t.Fatalf("after RecycleWait, claim = %+v, %v; want a spawn", c, ok)
	}
	if w.busy.Load() != before+1 || w.waitedStarts.Load() != 3 {
		t.Errorf("busy %d (want %d), waited starts %d (want 3)", w.busy.Load(), before+1, w.waitedStarts.Load())
	}
}

// TestSaturatedHostServesBurst: twelve no-op attempts at once on a host
// that looks saturated all succeed, served by standby supervisors, with
// starts waiting for busy ones and every claim given back.
func TestSaturatedHostServesBurst(t *testing.T) {
	defer func(f func(int, int) func() bool) { hostSaturation = f }(hostSaturation)
	hostSaturation = func(int, int) func() bool { return func() bool { return true } }
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.WarmSupervisors, cfg.MaxIdleSupervisors = 1, 16
	h := startWorker(t, state, cfg)
	waitFor(t, waitShort, "a spare", func() bool { return h.w.pool.len() == 1 })
	const n = 12
	for i := range n {
		state.assign(fmt.Sprintf("burst%d", i), fsm.JobSpec{Command: []string{"true"}})
	}
	for i := range n {
		if r := h.waitFinal(t, fmt.Sprintf("burst%d", i), waitLong); r.State != fsm.AttemptSucceeded {
			t.Fatalf("burst%d: %s %s", i, r.State, r.Reason)
		}
	}
	// How many processes served the burst depends on how fast attempts
	// come back (BenchmarkSaturatedBurst reports it); what must hold:
	// starts waited, every attempt went to a standby supervisor, and no
	// claim is left.
	if h.w.waitedStarts.Load() == 0 {
		t.Error("no start waited for a busy supervisor")
	}
	if used := h.w.sparesUsed.Load(); used != n {
		t.Errorf("%d attempts handed to standby supervisors, want %d", used, n)
	}
	waitFor(t, waitShort, "every claim ended", func() bool { return h.w.busy.Load() == 0 })
}

// TestWaitMore: a start on a saturated host waits on while supervisors
// come back, starts one once none has for twice the last one's time away
// (at least RecycleWait), and never waits past MaxRecycleWait.
func TestWaitMore(t *testing.T) {
	const s = time.Second
	never := time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		quiet, turn, waited, want time.Duration
	}{
		{quiet: 0, turn: 0, waited: 0, want: RecycleWait}, // one just came back (another took it)
		{quiet: 500 * time.Millisecond, turn: 0, waited: 3 * s, want: 500 * time.Millisecond},
		{quiet: s, turn: 0, waited: s, want: 0},                 // none back for RecycleWait
		{quiet: never, turn: 0, waited: s, want: 0},             // none ever came back
		{quiet: 2 * s, turn: 3 * s, waited: 2 * s, want: 4 * s}, // slow attempts: twice their time away
		{quiet: 6 * s, turn: 3 * s, waited: 6 * s, want: 0},
		{quiet: 0, turn: time.Hour, waited: 0, want: MaxRecycleWait}, // long jobs: capped
		{quiet: 0, turn: 0, waited: MaxRecycleWait - s, want: s},     // cut at MaxRecycleWait in all
		{quiet: 0, turn: 0, waited: MaxRecycleWait, want: 0},
	} {
		if got := waitMore(tc.quiet, tc.turn, tc.waited); got != tc.want {
			t.Errorf("waitMore(quiet %v, turn %v, waited %v) = %v, want %v", tc.quiet, tc.turn, tc.waited, got, tc.want)
		}
	}
}

// TestRunQueueAverage: one low reading in a storm does not make the host
// look calm; a reading after a long quiet stretch counts fully; reads come
// at most every runQueueEvery.
func TestRunQueueAverage(t *testing.T) {
	readings := []int{200, 200, 3, 200, 2}
	reads := 0
	q := &runQueue{read: func() (int, error) { n := readings[reads]; reads++; return n, nil }}
	t0 := time.Now()
	step := 100 * time.Millisecond
	for i, want := range []struct{ lo, hi float64 }{{200, 200}, {200, 200}, {150, 190}, {150, 200}} {
		avg, ok := q.average(t0.Add(time.Duration(i) * step))
		if !ok || avg < want.lo || avg > want.hi {
			t.Errorf("average after reading %d = %.1f, %v; want %v..%v", i, avg, ok, want.lo, want.hi)
		}
	}
	if avg, _ := q.average(t0.Add(3*step + runQueueEvery/2)); reads != 4 || avg < 150 {
		t.Errorf("a second ask within runQueueEvery read again (%d reads) or moved the average (%.1f)", reads, avg)
	}
	if avg, _ := q.average(t0.Add(3*step + 30*time.Second)); avg > 3 {
		t.Errorf("after 30 s of quiet the average is %.1f, want the new reading (2)", avg)
	}
}
