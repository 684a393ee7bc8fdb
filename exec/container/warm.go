package container

import (
	"fmt"
	"os"

	"github.com/cyphar/filepath-securejoin/pathrs-lite/procfs"
	"github.com/opencontainers/cgroups"

	"github.com/foreman-sched/foreman/exec"
)

var _ exec.Warmer = (*Driver)(nil)

// Warm implements exec.Warmer. libcontainer and opencontainers/cgroups open
// descriptors on first use that they keep for the life of the process:
//
//   - cgroups: an O_PATH handle on /sys/fs/cgroup, the root of every
//     openat2 into cgroupfs (and, on v1, the parsed cgroup mounts);
//   - pathrs-lite (via libcontainer): a private procfs mount (subset=pid)
//     through which /proc/thread-self/fd and friends are opened; without
//     the cache it mounts a new procfs for every such open.
//
// Opening them here, in a standby supervisor before it records its clean
// baseline, makes them part of that baseline (so the supervisor can be
// recycled: exec/DESIGN.md) and takes them off the first attempt's start.
// A host that cannot run containers has nothing to warm.
func (d *Driver) Warm() error {
	if d.Available() != nil {
		return nil
	}
	dir, file := cgroup2Root, "cgroup.controllers"
	if !cgroups.IsCgroup2UnifiedMode() {
		mp, err := cgroups.FindCgroupMountpoint("", "memory")
		if err != nil {
			return err
		}
		dir, file = mp, "memory.limit_in_bytes"
	}
	if _, err := cgroups.ReadFile(dir, file); err != nil {
		return fmt.Errorf("open cgroupfs: %w", err)
	}
	proc, err := procfs.OpenProcRoot()
	if err != nil {
		return fmt.Errorf("open procfs: %w", err)
	}
	proc.Close() // a no-op for the cached handle
	if err := os.MkdirAll(d.cfg.containersDir(), 0o700); err != nil {
		return err
	}
	_, err = d.hostRootfsFor(d.cfg.StateRoot)
	return err
}
