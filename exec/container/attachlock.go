package container

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/cgroups"
)

// primeAttachLock starts, in the background, a migration of this process
// into the cgroup it is already in (a no-op), and returns at once.
//
// Why: moving a process between cgroups (libcontainer writes the init's pid
// to cgroup.procs, in every v1 hierarchy or the v2 one) takes the kernel's
// cgroup_threadgroup_rwsem for writing. Unless the hierarchy is mounted with
// favordynmods, the first writer after a quiet period waits for a full RCU
// grace period (rcu_sync_enter → synchronize_rcu); writers that follow
// within a grace period of the last one do not. Measured here (HZ=250, two
// busy cores): that one 5-byte write took 5-20 ms, the largest single step
// of a container start on the supervisor's side. Started first thing in
// Start, the grace period elapses while the rootfs is resolved, the state
// dir created, the binary sealed and the init forked and exec'd, so the
// init's own migration finds the lock already switched to its slow mode.
// The cost is one extra no-op attach; an error changes nothing (the init's
// migration then simply pays the wait itself).
func primeAttachLock() {
	go func() {
		if dir := ownPidsCgroupDir(); dir != "" {
			_ = cgroups.WriteCgroupProc(dir, 0) // pid 0: the writer's own process
		}
	}()
}

// ownPidsCgroupDir is the directory of this process's cgroup in the pids
// hierarchy (v1) or the unified one (v2), "" if unknown.
func ownPidsCgroupDir() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	v2 := cgroups.IsCgroup2UnifiedMode()
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if v2 {
			if parts[0] == "0" && parts[1] == "" {
				return filepath.Join(cgroup2Root, parts[2])
			}
			continue
		}
		if !hasWord(strings.ReplaceAll(parts[1], ",", " "), "pids") {
			continue
		}
		mp, err := cgroups.FindCgroupMountpoint("", "pids")
		if err != nil {
			return ""
		}
		return filepath.Join(mp, parts[2])
	}
	return ""
}
