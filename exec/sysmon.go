package exec

import (
	"errors"
	"os"
	"strconv"
	"time"
)

// SysmonSlack is the timer slack the agent and its supervisors give the Go
// runtime's sysmon thread (RelaxSysmon).
const SysmonSlack = time.Millisecond

// RelaxSysmon sets the timer slack of the Go runtime's sysmon thread, and
// of no other, to SysmonSlack. The agent calls it when it starts, a standby
// supervisor before its first attempt. Why: after a syscall sysmon polls
// in usleep(20 µs) steps, 7% of the host's CPU samples in a throughput run;
// with the slack it wakes about once a millisecond (exec/DESIGN.md,
// "Sysmon's timer slack"). Jobs are forked from other threads and keep the
// host's slack. Best effort: without CAP_SYS_NICE or the proc file nothing
// changes and the error says why.
func RelaxSysmon() error {
	tid, err := sysmonThread()
	if err != nil {
		return err
	}
	return os.WriteFile("/proc/"+strconv.Itoa(tid)+"/timerslack_ns",
		[]byte(strconv.FormatInt(SysmonSlack.Nanoseconds(), 10)), 0)
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
