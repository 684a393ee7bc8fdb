package exec

import (
	"bytes"
	"errors"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A saturated host: more runnable tasks than SaturatedRunQueue per CPU.
// Every agent sizes its slots and start queue by the cores it sees, so
// agents that share a host (a test rig, several clients on one machine)
// each believe they own it: forty of them on two cores ran ~860 attempts at
// once, each with a supervisor process of its own, and the host spent more
// on starting those processes and on their runtimes' housekeeping than on
// the jobs. The run queue is the one figure they all see, so on a
// saturated host a start waits for one of its node's busy supervisors
// instead of forking another (spare.go, awaitSupervisor).

// hostRunnable reads the host's runnable tasks: the fourth field of
// /proc/loadavg before its slash ("0.52 0.58 0.59 3/467 1234"). It counts
// the reading thread too.
func hostRunnable() (int, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	return parseRunnable(b)
}

func parseRunnable(b []byte) (int, error) {
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 0, errors.New("loadavg: fewer than four fields")
	}
	run, _, ok := bytes.Cut(f[3], []byte("/"))
	if !ok {
		return 0, errors.New("loadavg: no runnable/total field")
	}
	return strconv.Atoi(string(run))
}

// hostCPUs is the number of the host's online CPUs
// (/sys/devices/system/cpu/online, "0-3,8-11"), which the run queue is
// spread over; runtime.NumCPU (this process's affinity) where it cannot be
// read.
func hostCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	if n := countCPUList(strings.TrimSpace(string(b))); n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// countCPUList counts the CPUs of a kernel CPU list; 0 if it is malformed.
func countCPUList(s string) int {
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}

// hostSaturation is saturatedHost; tests replace it to make a host look
// saturated.
var hostSaturation = saturatedHost

// saturatedHost reports whether the host's run queue, averaged over about
// a second (hostQueue), holds more than perCPU runnable tasks per online
// CPU; never when perCPU is 0 or the queue cannot be read.
func saturatedHost(perCPU, cpus int) func() bool {
	return func() bool {
		if perCPU <= 0 {
			return false
		}
		avg, ok := hostQueue.average(time.Now())
		return ok && avg > float64(perCPU*cpus)
	}
}

// hostQueue is the process's average of the host's run queue.
var hostQueue = &runQueue{read: hostRunnable}

// runQueue averages the instantaneous run queue, which jumps by hundreds
// from one read to the next on a busy host: forty agents that each took a
// single low reading for a calm host started supervisors in the middle of
// a storm. The average decays with a time constant of runQueueTau, so a
// reading after a long quiet stretch counts fully; reads are at least
// runQueueEvery apart, whoever asks.
type runQueue struct {
	read func() (int, error)
	mu   sync.Mutex
	at   time.Time // last read
	avg  float64
	ok   bool
}

const (
	runQueueTau   = time.Second
	runQueueEvery = 50 * time.Millisecond
)

func (q *runQueue) average(now time.Time) (float64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	dt := now.Sub(q.at)
	if q.ok && dt < runQueueEvery {
		return q.avg, true
	}
	n, err := q.read()
	if err != nil {
		return q.avg, q.ok
	}
	if !q.ok {
		q.avg, q.ok = float64(n), true
	} else {
		w := 1 - math.Exp(-dt.Seconds()/runQueueTau.Seconds())
		q.avg += w * (float64(n) - q.avg)
	}
	q.at = now
	return q.avg, true
}
