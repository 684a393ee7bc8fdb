package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	_ "github.com/opencontainers/cgroups/devices" // registers the v1 and v2 device controllers below
	devconf "github.com/opencontainers/cgroups/devices/config"
	"golang.org/x/sys/unix"
)

// DeviceCgroup is the cgroup a process job starts in so that the kernel
// itself refuses it the NVIDIA devices it does not hold. The rules are
// applied with libcontainer's device code (opencontainers/cgroups): on v1
// the devices controller's deny list, on v2 an eBPF device filter attached
// to the cgroup. Only the device controller is used: the job's cpu cgroup
// stays the jobs' one (exec/priority.go).
type DeviceCgroup struct {
	Dir string // the cgroup directory
	V2  bool
}

// DevicesMount returns the directory of the hierarchy device rules live
// in: the v1 devices controller's mount, or the v2 root.
func DevicesMount() (dir string, v2 bool, err error) {
	if cgroups.IsCgroup2UnifiedMode() {
		return "/sys/fs/cgroup", true, nil
	}
	dir, err = cgroups.FindCgroupMountpoint("", "devices")
	if err != nil {
		return "", false, fmt.Errorf("cgroup v1 devices controller: %w", err)
	}
	return dir, false, nil
}

// NewDeviceCgroup creates the cgroup path (such as
// /foreman/n1/process/<task>) in the hierarchy at mount and applies rules
// (DenyRules). A cgroup of that name left by a dead supervisor is reused.
func NewDeviceCgroup(mount string, v2 bool, path string, rules []*devconf.Rule) (*DeviceCgroup, error) {
	dir := filepath.Join(mount, filepath.Clean("/"+path))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("device cgroup: %w", err)
	}
	c := &DeviceCgroup{Dir: dir, V2: v2}
	set := cgroups.DevicesSetV1
	if v2 {
		set = cgroups.DevicesSetV2
	}
	if err := set(dir, &cgroups.Resources{Devices: rules}); err != nil {
		c.Remove()
		return nil, fmt.Errorf("device cgroup %s: %w", dir, err)
	}
	return c, nil
}

// JoinThread moves the calling OS thread into the cgroup (v1 moves single
// threads) and returns how to move it back: a process forked in between
// starts inside, from its first instruction. The caller must hold its
// thread (runtime.LockOSThread) from JoinThread until back has returned,
// and must not let the thread run anything else if back fails. v1 only:
// on v2 a fork clones into the cgroup instead (FD).
func (c *DeviceCgroup) JoinThread() (back func() error, err error) {
	tid := strconv.Itoa(unix.Gettid())
	prev, err := threadDevicesCgroup()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "tasks"), []byte(tid), 0o644); err != nil {
		return nil, fmt.Errorf("join device cgroup: %w", err)
	}
	return func() error {
		if err := os.WriteFile(filepath.Join(prev, "tasks"), []byte(tid), 0o644); err != nil {
			return fmt.Errorf("leave device cgroup: %w", err)
		}
		return nil
	}, nil
}

// threadDevicesCgroup is the v1 devices cgroup directory of the calling thread.
func threadDevicesCgroup() (string, error) {
	f, err := os.Open("/proc/thread-self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "5:devices:/some/path"
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && hasController(parts[1], "devices") {
			mount, err := cgroups.FindCgroupMountpoint("", "devices")
			if err != nil {
				return "", err
			}
			return filepath.Join(mount, parts[2]), nil
		}
	}
	return "", errors.New("this thread is in no v1 devices cgroup")
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// FD opens the cgroup for a fork that clones into it (CLONE_INTO_CGROUP,
// cgroup v2). The caller closes it.
func (c *DeviceCgroup) FD() (int, error) {
	return unix.Open(c.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// removeWait bounds how long Remove waits for the last killed processes
// of the job to be reaped (a cgroup with members cannot be removed).
const removeWait = 2 * time.Second

// Remove kills whatever is still in the cgroup (processes that left the
// job's process group) and removes it. It is idempotent.
func (c *DeviceCgroup) Remove() error {
	deadline := time.Now().Add(removeWait)
	for {
		err := unix.Rmdir(c.Dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove device cgroup %s: %w", c.Dir, err)
		}
		pids, _ := cgroups.GetAllPids(c.Dir)
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond) // killed members leave once reaped
	}
}
