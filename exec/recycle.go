package exec

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Recycled supervisors, the supervisor's side. A standby supervisor
// (`supervise --standby`, spawned by the worker; spare.go) serves attempts
// one after another over its control socketpair (fd 3):
//
//	worker → supervisor  the attempt dir, with its pre-listened lease socket (SCM_RIGHTS)
//	supervisor → worker  ctlAck   it took the attempt (sent before it acts)
//	supervisor → worker  ctlIdle  the attempt is over; it waits for the next one
//
// "Over" means: the job's process group is gone and reaped, the output is
// drained and the log files closed, result.json is written, the
// lease socket is closed and removed, and every goroutine of the attempt has
// returned. The worker collects the result from the directory as it always
// did; the supervisor never touches the directory again. Before saying idle
// the supervisor compares its process state (open descriptors, children,
// goroutines, cwd, environment, umask, signal dispositions, credentials,
// rlimits) with the state it had before its first attempt; any difference
// and it exits instead, so a leak costs a process start, never an attempt's
// isolation. A supervisor whose worker went away (EOF, or EPIPE on the idle
// message) exits; one that was mid-attempt when its agent died finishes the
// attempt under a re-adopting agent first, then exits.
const (
	ctlAck  byte = 1
	ctlIdle byte = 2
)

// groupGoneTimeout bounds the wait for the last members of a killed job's
// process group to disappear before the supervisor may take another attempt.
// cleanTimeout bounds the wait for the attempt's goroutines to return. Both
// are generous: on a host at a load of 60 the kernel and the Go scheduler
// can take seconds, and a supervisor that gives up is not reused (a process
// start lost). The goroutine wait comes after result.json, so it costs the
// attempt nothing.
const (
	groupGoneTimeout = 5 * time.Second
	cleanTimeout     = 5 * time.Second
)

// standbyMain is the recycling supervisor's life: wait for an attempt, run
// it, clean up, say idle, repeat; exit when the worker goes away or the
// process is not as clean as it was.
func standbyMain() int {
	ctl, err := openControl(listenerFD)
	if err != nil {
		return 0
	}
	defer ctl.Close()
	if err := RelaxSysmon(SupervisorSysmonSlack); err != nil {
		fmt.Fprintf(os.Stderr, "supervisor: sysmon keeps its timer slack: %v\n", err)
	}
	warmDrivers()
	base, err := snapshotProcess()
	if err != nil {
		return 0 // cannot prove cleanliness: serve nothing rather than risk a leak
	}
	for served := 0; ; served++ {
		dir, lnFD, ok := awaitHandoff(ctl)
		if !ok {
			return 0 // the worker let this supervisor go
		}
		redirectOutput(filepath.Join(dir, SupervisorLog))
		code, reusable := superviseDir(dir, lnFD)
		redirectOutput(os.DevNull)
		if code != 0 || !reusable {
			return code
		}
		if diff := waitClean(base); diff != "" {
			appendLine(filepath.Join(dir, SupervisorLog),
				"supervisor not recycled after attempt "+fmt.Sprint(served+1)+": "+diff)
			return 0
		}
		ctl.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := ctl.Write([]byte{ctlIdle}); err != nil {
			// The worker that handed us this attempt is gone.
			appendLine(filepath.Join(dir, SupervisorLog), "supervisor exits after its attempt: worker gone ("+err.Error()+")")
			return 0
		}
	}
}

// warmDrivers lets every registered driver open its process-wide handles
// before the baseline is taken (Warmer).
func warmDrivers() {
	for _, d := range Drivers() {
		if w, ok := d.(Warmer); ok {
			if err := w.Warm(); err != nil {
				fmt.Fprintf(os.Stderr, "supervisor: warm driver %s: %v\n", d.Name(), err)
			}
		}
	}
}

// openControl turns fd into the control connection.
func openControl(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "standby-control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("standby control: not a unix socket")
	}
	return uc, nil
}

// redirectOutput points stdout and stderr (the supervisor's own log) at path.
func redirectOutput(path string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		f, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return
		}
	}
	unix.Dup3(int(f.Fd()), 1, 0)
	unix.Dup3(int(f.Fd()), 2, 0)
	f.Close()
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

// processState is what an attempt could leave behind in the supervisor.
// Taking it costs ~30 µs: descriptors are compared by fstat identity (a
// readlink only to describe a difference), children by one waitid.
type processState struct {
	fds        map[int]fileID
	children   bool
	goroutines int
	cwd        string
	mntns      string // the main thread's mount namespace
	env        []string
	status     []string        // Umask, Sig*, NoNewPrivs, Seccomp, Cap*, Uid, Gid, Groups
	limits     [16]unix.Rlimit // RLIMIT_CPU … RLIMIT_RTTIME
}

type fileID struct{ dev, ino uint64 }

var statusKeys = []string{"Umask", "SigBlk", "SigIgn", "SigCgt", "NoNewPrivs", "Seccomp",
	"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "Uid", "Gid", "Groups"}

func snapshotProcess() (*processState, error) {
	p := &processState{fds: map[int]fileID{}, goroutines: runtime.NumGoroutine(), env: os.Environ()}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	self := int(d.Fd())
	d.Close()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd == self {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			p.fds[fd] = fileID{st.Dev, st.Ino}
		}
	}
	// ECHILD: no child at all, running or zombie (WNOWAIT reaps nothing).
	var si unix.Siginfo
	err = unix.Waitid(unix.P_ALL, 0, &si, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	p.children = !errors.Is(err, unix.ECHILD)
	if p.cwd, err = os.Getwd(); err != nil {
		return nil, err
	}
	if p.mntns, err = os.Readlink("/proc/self/ns/mnt"); err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, _, _ := strings.Cut(line, ":")
		if slices.Contains(statusKeys, k) {
			p.status = append(p.status, line)
		}
	}
	for r := range p.limits {
		if err := unix.Prlimit(0, r, nil, &p.limits[r]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// diff says how p differs from base ("" = as clean as base). Goroutines
// may only be fewer (the runtime's own come and go).
func (p *processState) diff(base *processState) string {
	var out []string
	for fd, id := range p.fds {
		if b, ok := base.fds[fd]; !ok || b != id {
			t, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
			out = append(out, fmt.Sprintf("fd %d open (%s)", fd, t))
		}
	}
	for fd := range base.fds {
		if _, ok := p.fds[fd]; !ok {
			out = append(out, fmt.Sprintf("fd %d closed", fd))
		}
	}
	if p.children {
		out = append(out, "children "+strings.Join(childPIDs(), ","))
	}
	if p.goroutines > base.goroutines {
		out = append(out, fmt.Sprintf("%d goroutines, %d before", p.goroutines, base.goroutines))
	}
	if p.cwd != base.cwd {
		out = append(out, "cwd "+p.cwd)
	}
	if p.mntns != base.mntns {
		// /proc/self/ns describes the main thread: a goroutine that locked
		// it and joined another namespace (libcontainer's mount-source
		// thread does, per container start) can never leave it again.
		out = append(out, "main thread in mount namespace "+p.mntns+", was "+base.mntns)
	}
	if !slices.Equal(p.env, base.env) {
		out = append(out, "environment changed")
	}
	if !slices.Equal(p.status, base.status) {
		out = append(out, "status changed: "+strings.Join(p.status, "; "))
	}
	if p.limits != base.limits {
		out = append(out, "rlimits changed")
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// childPIDs lists this process's children (to describe a difference).
func childPIDs() []string {
	var out []string
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		out = append(out, strings.Fields(string(b))...)
	}
	slices.Sort(out)
	return out
}

// waitClean waits until the process is as clean as base, and returns the
// difference that remains. Only the goroutine count is polled (briefly: a
// goroutine that delivered its last value may not have returned yet);
// the rest is checked once.
func waitClean(base *processState) string {
	deadline := time.Now().Add(cleanTimeout)
	for delay := 50 * time.Microsecond; runtime.NumGoroutine() > base.goroutines && time.Now().Before(deadline); delay = min(2*delay, 20*time.Millisecond) {
		time.Sleep(delay)
	}
	p, err := snapshotProcess()
	if err != nil {
		return "snapshot: " + err.Error()
	}
	return p.diff(base)
}

// waitGroupGone waits until process group pgid has no member left (the
// attempt's job and whatever it started in its group were SIGKILLed).
func waitGroupGone(pgid int) bool {
	deadline := time.Now().Add(groupGoneTimeout)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 20*time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
	}
}
