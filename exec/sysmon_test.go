package exec

import (
	"os"
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
)

// RelaxSysmon changes the timer slack of sysmon's thread, and of no other.
// That the thread it picks is sysmon's is checked by what only sysmon does:
// while every P is busy and a goroutine blocks in a syscall, sysmon takes
// its P back after each round of usleep(20 µs) and so keeps polling at that
// pace, far more often than any thread running goroutines switches.
func TestRelaxSysmonPicksSysmon(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("not root: another thread's timer slack needs CAP_SYS_NICE")
		}
		t.Skip("NOT ROOT: another thread's timer slack needs CAP_SYS_NICE; not tested")
	}
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
	if err := RelaxSysmon(); err != nil {
		t.Fatal(err)
	}
	for id, was := range slacks {
		now, ok := timerSlack(id)
		switch {
		case !ok:
			continue // the thread exited
		case id == tid && now != SysmonSlack.Nanoseconds():
			t.Errorf("sysmon's thread %d: timer slack %d ns, want %d", id, now, SysmonSlack.Nanoseconds())
		case id != tid && now != was:
			t.Errorf("thread %d (not sysmon's): timer slack changed from %d to %d ns", id, was, now)
		}
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
