package exec

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The timer slack the Go runtime's sysmon thread gets (RelaxSysmon). The
// agent's sysmon hands Ps back from blocking syscalls to raft, the API and
// the workers: it waits at most a millisecond more. A supervisor holds a
// lease whose timers are seconds long and runs nothing that needs a P back
// sooner, so its sysmon may sleep as long as sysmon ever does on its own,
// 10 ms: with hundreds of supervisors on a busy host each attempt's
// wall time stretches, and sysmon polls for as long as it lasts.
const (
	AgentSysmonSlack      = time.Millisecond
	SupervisorSysmonSlack = 10 * time.Millisecond
)

// RelaxSysmon sets the timer slack of the Go runtime's sysmon thread, and
// of no other, to slack. The agent calls it when it starts, a standby
// supervisor before its first attempt. Why: after a syscall sysmon polls
// in usleep(20 µs) steps, 7% of the host's CPU samples in a throughput run;
// with the slack it wakes about once per slack (exec/DESIGN.md, "Sysmon's
// timer slack"). Threads that sysmon creates later inherit the slack, so
// children are forked through WithHostSlack. Best effort: without
// CAP_SYS_NICE or the proc file nothing changes and the error says why.
func RelaxSysmon(slack time.Duration) error {
	tid, err := sysmonThread()
	if err != nil {
		return err
	}
	return os.WriteFile("/proc/"+strconv.Itoa(tid)+"/timerslack_ns",
		[]byte(strconv.FormatInt(slack.Nanoseconds(), 10)), 0)
}

// sysmonThread finds sysmon's thread id. runtime.main starts sysmon before
// any package's init and before any other thread, so of the process's
// threads it is the one created right after the main thread: the task id
// that follows the process id most closely, counting around where ids wrap
// (any bound at or above pid_max orders them the same: pidLimit). Call it
// early in the process's life, before the id counter could have gone round
// once.
func sysmonThread() (int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, err
	}
	pid, wrap := os.Getpid(), pidLimit
	best, bestDist := 0, wrap
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pid {
			continue
		}
		dist := (tid - pid + wrap) % wrap
		if dist < bestDist {
			best, bestDist = tid, dist
		}
	}
	if best == 0 {
		return 0, errors.New("sysmon: the process has no thread but its main one")
	}
	return best, nil
}

// pidLimit is the kernel's ceiling on pid_max (PID_MAX_LIMIT, 64-bit).
const pidLimit = 1 << 22

// hostSlack is the timer slack this process started with: its main
// thread's, which nothing here changes. 0 where it cannot be read (reading
// another thread's needs CAP_SYS_NICE, as RelaxSysmon's write does).
var hostSlack = sync.OnceValue(func() int64 {
	b, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
})

// WithHostSlack runs start, which forks a child (a job, a supervisor), on a
// thread whose timer slack is the host's, so the child gets the host's.
// Needed because a thread inherits the slack of the thread that created
// it: the runtime threads that sysmon starts (when it retakes a P from a
// syscall) carry sysmon's relaxed slack, and a child forked from one would
// keep it, and pass it to its own threads and children.
func WithHostSlack(start func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	setHostSlack()
	return start()
}

// startProcess is os.StartProcess from a thread with the host's timer
// slack (WithHostSlack).
func startProcess(path string, argv []string, attr *os.ProcAttr) (p *os.Process, err error) {
	err = WithHostSlack(func() error {
		p, err = os.StartProcess(path, argv, attr)
		return err
	})
	return p, err
}

// setHostSlack gives the calling (locked) thread the host's timer slack.
func setHostSlack() {
	if s := hostSlack(); s > 0 {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(s), 0, 0, 0)
	}
}
