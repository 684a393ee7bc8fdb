package exec

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"
)

// SysmonSlack is the timer slack the agent and its supervisors give the Go
// runtime's sysmon thread (RelaxSysmon).
const SysmonSlack = time.Millisecond

// RelaxSysmon lets the kernel batch the wake-ups of the Go runtime's
// sysmon thread: it sets that one thread's timer slack to SysmonSlack.
// The agent calls it when it starts, a standby supervisor before its first
// attempt.
//
// Why: a syscall that wakes sysmon from its deep sleep, or one that it
// finds blocking a P, makes it poll in usleep(20 µs) steps, 50 rounds or
// more before it backs off; an agent running attempts makes syscalls all
// the time, and a supervisor wakes for every step of every attempt
// (handoff, fork, exit, output, result, idle). Each of those sleeps is a
// timer armed and fired, a context switch out and back; in a throughput
// run they were 7% of the host's CPU samples (2.3% agents, 4.3%
// supervisors), and more than that in what the run cost (timers are dear
// in a VM; docs/benchmarks.md, "Sixth stop"). With a slack of 1 ms the
// kernel may end each sleep up to 1 ms late, so a busy process's sysmon
// wakes about once a millisecond instead of every ~70 µs. What sysmon then
// does later: taking back a P from a syscall that blocks (goroutines
// queued on it wait up to a millisecond longer, unless an idle P steals
// them first), preempting a goroutine that ran 10 ms, polling the network
// when no P did for 10 ms. Raft's timeouts, leases and beats are hundreds
// of milliseconds and more.
//
// Only that thread: every other thread keeps its slack, and a job is
// forked from one of those and inherits its slack, so jobs keep the
// host's. Best effort: without CAP_SYS_NICE (not root) or on a kernel
// without the file, nothing changes and the error says why.
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
// that follows the process id most closely, counting around pid_max where
// ids wrap. Call it early in the process's life, before the id counter
// could have gone round once.
func sysmonThread() (int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, err
	}
	pid, wrap := os.Getpid(), pidMax()
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

// pidMax is the kernel's pid_max (the default 4,194,304 if it cannot be read).
func pidMax() int {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			return n
		}
	}
	return 1 << 22
}
