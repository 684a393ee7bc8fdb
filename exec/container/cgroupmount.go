package container

import (
	"path/filepath"
	"sync"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

// cgroupMountDir is where a container sees its own cgroups (read-only).
const cgroupMountDir = "/sys/fs/cgroup"

// v1VisibleSubsystems are the cgroup v1 controllers a job sees at
// /sys/fs/cgroup/<hierarchy>: the ones whose limits the driver sets or that
// runtimes (the JVM, Go's GOMAXPROCS) read to size themselves.
var v1VisibleSubsystems = []string{"cpu", "cpuacct", "memory", "pids"}

// v1Hierarchies lists, once per process, the mountpoints of the hierarchies
// holding v1VisibleSubsystems (one per hierarchy: "cpu,cpuacct" may be one).
var v1Hierarchies = sync.OnceValue(func() []string {
	var mnts []string
	seen := map[string]bool{}
	for _, ss := range v1VisibleSubsystems {
		mnt, err := cgroups.FindCgroupMountpoint("", ss)
		if err != nil || seen[mnt] {
			continue
		}
		seen[mnt] = true
		mnts = append(mnts, mnt)
	}
	return mnts
})

// cgroupMounts returns the mounts that show the job its cgroups.
//
// On v2 it is one read-only cgroup2 mount (with the cgroup namespace the
// job sees only its own subtree).
//
// On v1, libcontainer's "cgroup" mount type binds the container's cgroup
// of *every* host hierarchy (ten here, each bind plus a read-only remount,
// each through pathrs-lite's openat2 and /proc readlink checks, after
// parsing mountinfo): 2.9 ms of the init's ~19 ms CPU per start
// (perf, DESIGN.md). A job needs only the hierarchies that carry its
// limits, so this builds a small tmpfs with read-only binds of the
// container's own cgroup in the cpu, cpuacct, memory and pids hierarchies
// — the same source paths libcontainer's cgroup manager creates
// (<mountpoint>/<cgroupPath>, fs.subsysPath). The tmpfs itself is
// writable, exactly as libcontainer's own v1 cgroup tmpfs is (it is private
// to the container and empty apart from the mountpoints).
func cgroupMounts(v2 bool, cgroupPath string) []*configs.Mount {
	const flags = unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV | unix.MS_RELATIME
	if v2 {
		return []*configs.Mount{{Source: "cgroup", Destination: cgroupMountDir, Device: "cgroup", Flags: flags | unix.MS_RDONLY}}
	}
	mounts := []*configs.Mount{{Source: "tmpfs", Destination: cgroupMountDir, Device: "tmpfs", Flags: flags, Data: "mode=755,size=64k"}}
	for _, mnt := range v1Hierarchies() {
		mounts = append(mounts, &configs.Mount{
			Source:      filepath.Join(mnt, cgroupPath),
			Destination: filepath.Join(cgroupMountDir, filepath.Base(mnt)),
			Device:      "bind",
			Flags:       unix.MS_BIND | unix.MS_RDONLY | flags,
		})
	}
	return mounts
}
