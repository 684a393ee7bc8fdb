package exec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/exec/gpu"
)

// The control plane first. A node's raft heartbeats, gossip probes and API
// answers must not wait behind the jobs: with hundreds of jobs runnable on
// two cores, the agent's goroutines got a slice of a core now and then,
// heartbeats were late, and the leader stepped down. So what a user runs
// has a lower CPU weight than the agent:
//
//   - Process jobs are forked at nice JobNice: Linux nice is per thread and
//     a child inherits its creating thread's, so the supervisor forks every
//     job from one thread of its own (the job launcher) that runs at that
//     nice.
//   - Where this agent may create cgroups (root), process jobs start in
//     <JobsCgroup>/process of the cpu controller (v1: the launcher thread
//     sits in it, and a child inherits its thread's cgroup; v2: the fork
//     clones into it). <JobsCgroup>, which also holds the container
//     driver's job cgroups (<JobsCgroup>/<attempt>), gets JobsCPUWeight
//     (cpu.weight on v2, cpu.shares = weight × 1024 / 100 on v1). However
//     many jobs are runnable, they share one weight against the agent's.
//
// The supervisor itself keeps the agent's priority. Its work per attempt
// is foreman's own and bounded (admission bounds how many attempts start
// and live at once), and it lies on the path of every start and finish:
// run below the agent, and below every other busy process of the host, it
// waited in the run queue at each step, and no-op throughput fell with it
// (docs/benchmarks.md). A job's CPU is unbounded; that is what must not
// compete with the control plane.
//
// Both only matter under contention: an idle agent leaves the jobs every
// cycle.

// Environment a supervisor reads (set by the worker, spare.go).
const (
	envJobNice    = "FOREMAN_JOB_NICE"
	envJobsCgroup = "FOREMAN_JOBS_CGROUP" // the process jobs' cgroup dir
)

// ProcessJobsLeaf is the child of JobsCgroup that holds process jobs. The
// container driver leaves it alone when it cleans stale job cgroups
// (exec/container/orphans.go).
const ProcessJobsLeaf = "process"

// cpuCgroupRoot is where the cpu controller is mounted: the v1 cpu
// hierarchy, or the unified v2 root.
func cpuCgroupRoot() (root string, v2 bool) {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "/sys/fs/cgroup", true
	}
	return "/sys/fs/cgroup/cpu", false
}

// setupJobsCgroup creates parent (a cgroup path such as /foreman/n1) in
// the cpu controller with the given weight, and its process jobs' leaf,
// and returns the leaf's directory.
func setupJobsCgroup(parent string, weight int) (string, error) {
	root, v2 := cpuCgroupRoot()
	dir := filepath.Join(root, parent)
	if v2 {
		// The cpu controller must be enabled on every level above dir.
		rel := strings.Split(strings.Trim(parent, "/"), "/")
		cur := root
		for _, part := range rel {
			if err := enableCPUController(cur); err != nil {
				return "", err
			}
			cur = filepath.Join(cur, part)
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "cpu.weight"), []byte(strconv.Itoa(weight)), 0o644); err != nil {
			return "", fmt.Errorf("cpu.weight: %w", err)
		}
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		shares := max(weight*1024/100, 2)
		if err := os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte(strconv.Itoa(shares)), 0o644); err != nil {
			return "", fmt.Errorf("cpu.shares: %w", err)
		}
	}
	leaf := filepath.Join(dir, ProcessJobsLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return leaf, nil
}

func enableCPUController(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	if strings.Contains(" "+string(b)+" ", " cpu ") || strings.Contains(string(b), "cpu\n") {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu"), 0o644)
}

// supervisorEnv is a supervisor's environment: the agent's, plus
// SupervisorEnv and what its job launcher needs (nil: the agent's
// unchanged).
func (w *Worker) supervisorEnv() []string {
	env := w.cfg.SupervisorEnv
	if w.cfg.JobNice > 0 {
		env = append(env, envJobNice+"="+strconv.Itoa(w.cfg.JobNice))
	}
	if w.processJobsDir != "" {
		env = append(env, envJobsCgroup+"="+w.processJobsDir)
	}
	if len(env) == 0 {
		return nil
	}
	return append(os.Environ(), env...)
}

// jobsCgroupDir sets up the jobs cgroup for cfg and returns the directory
// process jobs start in ("" when there is none).
func jobsCgroupDir(cfg *WorkerConfig, log interface{ Warn(string, ...any) }) string {
	if cfg.JobsCPUWeight == 0 {
		return ""
	}
	parent := cfg.JobsCgroup
	if parent == "" {
		parent = "/foreman/" + cfg.Node
	}
	dir, err := setupJobsCgroup(parent, cfg.JobsCPUWeight)
	if err != nil {
		log.Warn("no cpu cgroup for jobs: process jobs compete with the agent at their nice value only", "cgroup", parent, "err", err)
		return ""
	}
	return dir
}

// jobLauncher is the supervisor's thread that forks process jobs (nil: they
// are forked from any thread, at the supervisor's own priority). Set once,
// by startJobLauncher, before the supervisor serves an attempt.
var jobLauncher *launcher

// launcher runs forks on one OS thread that is at the job nice and, on
// cgroup v1, in the jobs cgroup. The thread never exits: it is the parent
// thread of every job it forks, whose Pdeathsig would fire if it did.
type launcher struct {
	forks    chan func()
	cgroupFD int // v2: the jobs cgroup, for CLONE_INTO_CGROUP; -1 otherwise
}

// startJobLauncher starts the job launcher as the worker's environment
// asks. It runs before a standby supervisor records its clean state, so
// the launcher's goroutine and descriptor are part of it. A failure costs
// only priority, never the attempt: it is returned for logging, and jobs
// start as well as the launcher could be set up.
func startJobLauncher() error {
	nice, cgroup := 0, os.Getenv(envJobsCgroup)
	var errs []error
	if v := os.Getenv(envJobNice); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", envJobNice, v, err))
		}
		nice = n
	}
	if nice == 0 && cgroup == "" {
		return errors.Join(errs...)
	}
	l := &launcher{forks: make(chan func()), cgroupFD: -1}
	_, v2 := cpuCgroupRoot()
	if cgroup != "" && v2 {
		// A v2 domain cgroup takes whole processes only: the fork clones
		// straight into it instead (kernel 5.7+). UNTESTED HERE: this host
		// is cgroup v1.
		fd, err := unix.Open(cgroup, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			errs = append(errs, fmt.Errorf("open %s: %w", cgroup, err))
		} else {
			l.cgroupFD = fd
		}
	}
	ready := make(chan error)
	goOffMainThread(func() { // never unlocked: the thread lives as long as the process
		setHostSlack() // every job is forked here
		var errs []error
		if cgroup != "" && !v2 {
			// v1 moves single threads: only this one joins.
			tasks := filepath.Join(cgroup, "tasks")
			if err := os.WriteFile(tasks, []byte(strconv.Itoa(unix.Gettid())), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("join %s: %w", tasks, err))
			}
		}
		if nice != 0 {
			if err := unix.Setpriority(unix.PRIO_PROCESS, 0, nice); err != nil {
				errs = append(errs, fmt.Errorf("nice %d: %w", nice, err))
			}
		}
		ready <- errors.Join(errs...)
		for fork := range l.forks {
			fork()
		}
	})
	errs = append(errs, <-ready)
	jobLauncher = l
	return errors.Join(errs...)
}

// startJobProcess is os.StartProcess for a job: forked by the job launcher,
// if there is one, so that the job starts below the agent, and inside its
// device cgroup dc when it has one (GPU isolation, process_gpu.go). The
// trap: while the launcher forks it holds the supervisor's one P (process
// attempts run on one, supervisor.go), so the supervisor waits for one fork
// at the job's priority; that is the job's own start, which waited as long
// before.
func startJobProcess(path string, argv []string, attr *os.ProcAttr, dc *gpu.DeviceCgroup) (*os.Process, error) {
	if dc != nil && dc.V2 {
		// v2: the fork clones straight into the device cgroup, a child of
		// the jobs cgroup, so the cpu weight still applies. Never without
		// it: there is no fallback that keeps the isolation.
		fd, err := dc.FD()
		if err != nil {
			return nil, fmt.Errorf("gpu isolation: %w", err)
		}
		defer unix.Close(fd)
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, fd
	}
	l := jobLauncher
	if l == nil {
		if dc == nil || dc.V2 {
			return startProcess(path, argv, attr)
		}
		// v1 moves threads: fork from a thread of our own that joins the
		// device cgroup. A thread that could not leave it again is not
		// given back to the runtime (a locked goroutine's exit ends it).
		var p *os.Process
		var err error
		done := make(chan struct{})
		goOffMainThread(func() {
			defer close(done)
			setHostSlack()
			var stuck bool
			p, err, stuck = forkInDeviceCgroup(path, argv, attr, dc)
			if !stuck {
				runtime.UnlockOSThread()
			}
		})
		<-done
		return p, err
	}
	useJobsFD := l.cgroupFD >= 0 && !attr.Sys.UseCgroupFD
	if useJobsFD {
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, l.cgroupFD
	}
	var p *os.Process
	var err error
	done := make(chan struct{})
	l.forks <- func() {
		defer close(done)
		if dc == nil || dc.V2 {
			p, err = os.StartProcess(path, argv, attr)
			return
		}
		// A launcher that could not leave the device cgroup stays in it:
		// later jobs then get fewer devices, never more, and the cgroup
		// cannot be removed, so Destroy fails and the supervisor is not
		// recycled (recycle.go).
		p, err, _ = forkInDeviceCgroup(path, argv, attr, dc)
	}
	<-done
	if useJobsFD && errors.Is(err, unix.ENOSYS) {
		// No clone3 (kernel < 5.7): jobs start at the job nice only.
		l.cgroupFD = -1
		attr.Sys.UseCgroupFD = false
		return startJobProcess(path, argv, attr, dc)
	}
	return p, err
}

// goOffMainThread runs f in a new goroutine locked to an OS thread that is
// not the process's main thread; f may unlock it. A thread set apart (a
// nice, a v1 cgroup) must not be the main one: /proc/PID/stat and
// /proc/PID/cgroup, and so ps, top and the tests, show the main thread's,
// and a new goroutine often runs there (the spawner blocks at once and its
// thread, the main one, takes the goroutine next). foreman's supervise
// keeps the main thread locked from init (main.go); exec's test binary
// does not, and there a supervisor whose launcher sat on the main thread
// looked as if it ran at the job nice, in the jobs cgroup (CI).
func goOffMainThread(f func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f()
			return
		}
		// Hold the main thread while a second goroutine locks its own: a
		// locked thread runs no other goroutine, so the second cannot
		// land on it.
		locked := make(chan struct{})
		goOffMainThread(func() {
			close(locked)
			f()
		})
		<-locked
		runtime.UnlockOSThread()
	}()
}

// forkInDeviceCgroup forks from the calling (locked) thread while it sits
// in the v1 device cgroup dc. stuck: the thread is still in dc.
func forkInDeviceCgroup(path string, argv []string, attr *os.ProcAttr, dc *gpu.DeviceCgroup) (p *os.Process, err error, stuck bool) {
	back, err := dc.JoinThread()
	if err != nil {
		return nil, fmt.Errorf("gpu isolation: %w", err), false
	}
	p, err = os.StartProcess(path, argv, attr)
	if berr := back(); berr != nil {
		if p != nil {
			p.Kill()
			p.Wait()
		}
		return nil, fmt.Errorf("gpu isolation: %w", berr), true
	}
	return p, err, false
}
