package gpu

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/foreman-sched/foreman/fsm"
)

// XID errors are how the NVIDIA driver reports a GPU fault: one kernel log
// line per event, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python,
// GPU has fallen off the bus." (the format leptonai/gpud and NVIDIA's device
// plugin parse). The agent reads them from /dev/kmsg.

// AppXIDs are the XIDs an application causes (a bad kernel, an illegal
// address: 13, 31, 43, 45, 68, 109; k8s-device-plugin#1340): they are
// reported against the job but leave the device healthy. Every other XID
// marks the device unhealthy, as NVIDIA's device plugin does.
var AppXIDs = []int{13, 31, 43, 45, 68, 109}

// XID is one parsed XID line.
type XID struct {
	Bus  string // the device's PCI address, normalised ("0000:3b:00.0")
	Code int
	PID  int    // 0 when the line names none
	Proc string // the process name the line gives
	Text string // the rest of the line
}

// Critical reports whether x makes its device unhealthy.
func (x XID) Critical() bool { return !slices.Contains(AppXIDs, x.Code) }

// ParseXID parses one kernel log line (a /dev/kmsg record
// "pri,seq,usec,flags;message" or a dmesg line); ok is false for any line
// that is not an XID.
func ParseXID(line string) (x XID, ok bool) {
	i := strings.Index(line, "NVRM: Xid (PCI:")
	if i < 0 {
		return XID{}, false
	}
	rest := line[i+len("NVRM: Xid (PCI:"):]
	bus, rest, ok := strings.Cut(rest, "): ")
	if !ok {
		return XID{}, false
	}
	if !strings.Contains(bus, ".") {
		bus += ".0" // the driver prints domain:bus:device
	}
	if x.Bus, _ = NormalizeBusID(bus); x.Bus == "" {
		return XID{}, false
	}
	code, rest, _ := strings.Cut(rest, ",")
	if x.Code, _ = strconv.Atoi(strings.TrimSpace(code)); x.Code <= 0 {
		return XID{}, false
	}
	for {
		f, more, _ := strings.Cut(strings.TrimSpace(rest), ",")
		switch {
		case strings.HasPrefix(f, "pid="):
			x.PID, _ = strconv.Atoi(strings.TrimPrefix(f, "pid="))
		case strings.HasPrefix(f, "name="):
			x.Proc = strings.TrimPrefix(f, "name=")
		default:
			x.Text = strings.TrimSpace(rest)
			return x, true
		}
		rest = more
	}
}

// Reason is how x reads in a device's health and in events.
func (x XID) Reason(job string) string {
	s := "xid " + strconv.Itoa(x.Code)
	if x.Text != "" {
		s += ": " + strings.TrimSuffix(x.Text, ".")
	}
	switch {
	case job != "":
		s += fmt.Sprintf(" (pid %d, job %s)", x.PID, job)
	case x.PID > 0:
		s += fmt.Sprintf(" (pid %d %s)", x.PID, x.Proc)
	}
	return s
}

// WatchXIDs reads kernel log lines from r until it ends (the agent: /dev/kmsg,
// opened and moved to its end so only new faults count) and calls on with
// each XID. It blocks.
func WatchXIDs(r io.Reader, on func(XID)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 8192), 1<<20) // a kmsg record is at most ~8 KiB
	for sc.Scan() {
		if x, ok := ParseXID(sc.Text()); ok {
			on(x)
		}
	}
	return sc.Err()
}

// JobOfPID names the foreman job a process belongs to, from its
// environment (every job has FOREMAN_JOB_ID), read under root; "" when the
// process is gone or is no job.
func JobOfPID(root string, pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(root, "proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return ""
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, "FOREMAN_JOB_ID="); ok {
			return v
		}
	}
	return ""
}

// XIDHealth remembers the devices critical XIDs made unhealthy until they
// have been quiet for a number of detections (the agent detects every
// 30 s), so a transient fault heals by itself and a persistent one keeps
// the leader away: NVIDIA's device plugin keeps a device unhealthy until
// it restarts (k8s-device-plugin#234), which users ask to fix. Safe for
// concurrent use.
type XIDHealth struct {
	mu    sync.Mutex
	quiet int                 // clean detections before a device recovers
	marks map[string]*xidMark // by bus
}

type xidMark struct {
	reason string
	clean  int
}

// NewXIDHealth returns a tracker whose devices recover after quiet clean
// detections.
func NewXIDHealth(quiet int) *XIDHealth {
	return &XIDHealth{quiet: quiet, marks: map[string]*xidMark{}}
}

// Record marks x's device unhealthy with reason (a critical XID), or
// starts its quiet count again.
func (h *XIDHealth) Record(x XID, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.marks[x.Bus] = &xidMark{reason: reason}
}

// Apply is called with each detection: a marked device gets the XID's
// reason as its health (unless detection found it unhealthy itself) and
// one more clean detection; one quiet long enough is forgotten.
func (h *XIDHealth) Apply(gpus []fsm.GPU) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range gpus {
		bus, _ := NormalizeBusID(gpus[i].BusID)
		m := h.marks[bus]
		if m == nil {
			continue
		}
		if m.clean >= h.quiet {
			delete(h.marks, bus)
			continue
		}
		m.clean++
		if gpus[i].Health == "" {
			gpus[i].Health = m.reason
		}
	}
}

// Forget drops the marks of the devices at buses (an operator's health
// reset) and says how many it dropped: the next Apply leaves them as
// detection finds them.
func (h *XIDHealth) Forget(buses []string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, b := range buses {
		b, _ = NormalizeBusID(b)
		if _, ok := h.marks[b]; ok {
			delete(h.marks, b)
			n++
		}
	}
	return n
}
