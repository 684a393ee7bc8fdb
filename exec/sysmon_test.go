package exec

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RelaxSysmon changes the timer slack of sysmon's thread, and of no other.
// That the thread it picks is sysmon's is checked by what only sysmon does:
// while every P is busy and a goroutine blocks in a syscall, sysmon takes
// its P back after each round of usleep(20 µs) and so keeps polling at that
// pace, far more often than any thread running goroutines switches.
func TestRelaxSysmonPicksSysmon(t *testing.T) {
	requireSysNice(t)
	tid, err := sysmonThread()
	if err != nil {
		t.Fatal(err)
	}

	before := threadSwitches(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) { // no idle P: sysmon retakes the syscall's
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
			}
		}()
	}
	ts := syscall.Timespec{Nsec: int64(time.Millisecond)}
	for range 200 {
		// Syscall, not a blocking-aware wrapper: the P stays with the
		// thread until sysmon takes it back.
		syscall.Syscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
	}
	stop.Store(true)
	wg.Wait()
	after := threadSwitches(t)

	most, next := 0, 0
	for id, n := range after {
		d := n - before[id]
		if id == tid {
			most = d
		} else if d > next {
			next = d
		}
	}
	t.Logf("sysmon %d switches, next %d", most, next)
	if most < 2*next {
		t.Fatalf("thread %d switched %d times under the syscall load, another thread %d: it is not sysmon's (switches per thread: before %v, after %v)",
			tid, most, next, before, after)
	}

	slacks := timerSlacks(t)
	if err := RelaxSysmon(AgentSysmonSlack); err != nil {
		t.Fatal(err)
	}
	for id, was := range slacks {
		now, ok := timerSlack(id)
		switch {
		case !ok:
			continue // the thread exited
		case id == tid && now != AgentSysmonSlack.Nanoseconds():
			t.Errorf("sysmon's thread %d: timer slack %d ns, want %d", id, now, AgentSysmonSlack.Nanoseconds())
		case id != tid && now != was:
			t.Errorf("thread %d (not sysmon's): timer slack changed from %d to %d ns", id, was, now)
		}
	}
}

// requireSysNice stops a test that reads or sets another thread's timer
// slack where that needs a capability this process lacks.
func requireSysNice(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("not root: another thread's timer slack needs CAP_SYS_NICE")
		}
		t.Skip("NOT ROOT: another thread's timer slack needs CAP_SYS_NICE; not tested")
	}
}

// threadSwitches reads each thread's voluntary context switches.
func threadSwitches(t *testing.T) map[int]int {
	out := map[int]int{}
	for _, id := range threads(t) {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", strconv.Itoa(id), "status"))
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				out[id], _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
	}
	return out
}

func timerSlacks(t *testing.T) map[int]int64 {
	out := map[int]int64{}
	for _, id := range threads(t) {
		if n, ok := timerSlack(id); ok {
			out[id] = n
		}
	}
	return out
}

// timerSlack reads a thread's timer slack; false if it exited.
func timerSlack(tid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/timerslack_ns")
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

func threads(t *testing.T) []int {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, e := range entries {
		if id, err := strconv.Atoi(e.Name()); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// A child forked through WithHostSlack gets the host's timer slack even
// when the forking thread carries another, as the threads that sysmon
// creates carry sysmon's: a thread inherits its creator's slack, a child
// its forking thread's.
func TestWithHostSlackForksWithTheHostsSlack(t *testing.T) {
	requireSysNice(t)
	host := hostSlack()
	if host == 0 {
		t.Fatal("cannot read this process's timer slack")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	relaxed := host + AgentSysmonSlack.Nanoseconds() // any slack but the host's
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(relaxed), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer setHostSlack()
	childSlack := func(start func(func() error) error) int64 {
		t.Helper()
		cmd := osexec.Command("cat", "/proc/self/timerslack_ns")
		var out strings.Builder
		cmd.Stdout = &out
		if err := start(cmd.Start); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	direct := func(start func() error) error { return start() }
	if got := childSlack(direct); got != relaxed {
		t.Fatalf("forked straight from a thread with slack %d ns, the child has %d: the inheritance this guards against is not what the test assumes", relaxed, got)
	}
	if got := childSlack(WithHostSlack); got != host {
		t.Errorf("forked through WithHostSlack, the child's timer slack is %d ns, want the host's %d", got, host)
	}
}
