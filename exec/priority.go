package exec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The control plane first. A node's raft heartbeats, gossip probes and API
// answers must not wait behind job start-up: with hundreds of supervisors
// and jobs runnable on two cores, the agent's goroutines got a slice of a
// core now and then, heartbeats were late, and the leader stepped down. So
// everything an attempt runs has a lower CPU weight than the agent:
//
//   - Supervisors (and so the process jobs they fork, and the container
//     inits they start) run at nice SupervisorNice. Linux nice is per
//     thread, so the supervisor renices every thread it has at start-up;
//     threads created later inherit it.
//   - Where this agent may create cgroups (root), supervisors move
//     themselves into <JobsCgroup>/supervisor of the cpu controller, and
//     <JobsCgroup> — which also holds the container driver's job cgroups,
//     <JobsCgroup>/<attempt> — gets JobsCPUWeight (cpu.weight on v2,
//     cpu.shares = weight × 1024 / 100 on v1). However many jobs are
//     runnable, they share one weight against the agent's.
//
// Both only matter under contention: an idle agent leaves the jobs every
// cycle.

// Environment a supervisor reads (set by the worker, spare.go).
const (
	envSupervisorNice   = "FOREMAN_SUPERVISOR_NICE"
	envSupervisorCgroup = "FOREMAN_SUPERVISOR_CGROUP" // a cgroup.procs file
)

// cpuCgroupRoot is where the cpu controller is mounted: the v1 cpu
// hierarchy, or the unified v2 root.
func cpuCgroupRoot() (root string, v2 bool) {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "/sys/fs/cgroup", true
	}
	return "/sys/fs/cgroup/cpu", false
}

// setupJobsCgroup creates parent (a cgroup path such as /foreman/n1) in
// the cpu controller with the given weight, and its supervisor leaf, and
// returns the leaf's cgroup.procs for supervisors to move into.
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
	// The container driver leaves a child named "supervisor" alone
	// (exec/container/orphans.go).
	leaf := filepath.Join(dir, "supervisor")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return filepath.Join(leaf, "cgroup.procs"), nil
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
// SupervisorEnv and what makes it lower its own priority (nil: the
// agent's unchanged).
func (w *Worker) supervisorEnv() []string {
	env := w.cfg.SupervisorEnv
	if w.cfg.SupervisorNice > 0 {
		env = append(env, envSupervisorNice+"="+strconv.Itoa(w.cfg.SupervisorNice))
	}
	if w.jobsProcs != "" {
		env = append(env, envSupervisorCgroup+"="+w.jobsProcs)
	}
	if len(env) == 0 {
		return nil
	}
	return append(os.Environ(), env...)
}

// jobsCgroupProcs sets up the jobs cgroup for cfg and returns the
// cgroup.procs supervisors join ("" when there is none).
func jobsCgroupProcs(cfg *WorkerConfig, log interface{ Warn(string, ...any) }) string {
	if cfg.JobsCPUWeight == 0 {
		return ""
	}
	parent := cfg.JobsCgroup
	if parent == "" {
		parent = "/foreman/" + cfg.Node
	}
	procs, err := setupJobsCgroup(parent, cfg.JobsCPUWeight)
	if err != nil {
		log.Warn("no cpu cgroup for jobs: supervisors and jobs compete with the agent at their nice value only", "cgroup", parent, "err", err)
		return ""
	}
	return procs
}

// lowerSupervisorPriority runs first in a supervisor: into the jobs cgroup,
// then every thread reniced. Failures only cost priority, never the
// attempt, so they are returned for logging.
func lowerSupervisorPriority() error {
	var errs []error
	if procs := os.Getenv(envSupervisorCgroup); procs != "" {
		if err := os.WriteFile(procs, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("join %s: %w", procs, err))
		}
	}
	if v := os.Getenv(envSupervisorNice); v != "" {
		nice, err := strconv.Atoi(v)
		if err == nil {
			err = reniceThreads(nice)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("nice %s: %w", v, err))
		}
	}
	return errors.Join(errs...)
}

// reniceThreads sets nice on every thread of this process (Linux nice is
// per thread; new threads inherit their creator's). A thread that a
// not-yet-reniced thread creates during a pass shows up in the next one,
// so passes repeat until one finds no thread it had not seen.
func reniceThreads(nice int) error {
	seen := map[int]bool{}
	for pass := 0; pass < 20; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || seen[tid] {
				continue
			}
			fresh, seen[tid] = true, true
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
		}
		if !fresh {
			return nil
		}
	}
	return nil
}
