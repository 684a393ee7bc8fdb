package container

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// cgroup2Root is where the unified hierarchy is mounted on a v2 host.
const cgroup2Root = "/sys/fs/cgroup"

// supervisorLeaf is the leaf foreman's own processes move into on v2.
const supervisorLeaf = "supervisor"

// prepareCgroups handles cgroup v2's no-internal-processes rule. If job
// cgroups will live below the cgroup this process is in, and that cgroup
// is not the real root (a systemd unit with Delegate=yes, or a container
// with a private cgroupns where "/" is not the host root), every process
// in it must first move into a leaf (<own>/supervisor); otherwise creating
// <parent>/<id> fails with "cannot enter cgroupv2 ... invalid state" and
// leaves the parent in "domain threaded" mode.
//
// UNTESTED HERE: this host is cgroup v1; the steps follow the probe's v2
// VM runs (reference/libcontainer.md §4). On v1 this is a no-op.
func (d *Driver) prepareCgroups() error {
	if !cgroups.IsCgroup2UnifiedMode() {
		return nil
	}
	own, err := ownCgroupV2()
	if err != nil {
		return err
	}
	if !isDescendant(d.cgroupParent, own) {
		return nil
	}
	ownDir := filepath.Join(cgroup2Root, own)
	if _, err := os.Stat(filepath.Join(ownDir, "cgroup.type")); errors.Is(err, fs.ErrNotExist) {
		return nil // the real root cgroup: exempt from the rule
	}
	return moveToLeaf(ownDir)
}

// ownCgroupV2 reads this process's cgroup from /proc/self/cgroup ("0::/x").
func ownCgroupV2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return path.Clean(p), nil
		}
	}
	return "", fmt.Errorf("no cgroup v2 entry in /proc/self/cgroup")
}

func isDescendant(child, parent string) bool {
	return parent == "/" || strings.HasPrefix(child, strings.TrimSuffix(parent, "/")+"/")
}

// moveToLeaf moves every process of dir into dir/supervisor, then enables
// the controllers jobs need in dir's subtree_control. Processes that exit
// meanwhile are skipped; the loop repeats until dir holds no process.
func moveToLeaf(dir string) error {
	leaf := filepath.Join(dir, supervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cgroup v2 delegation: %w", err)
	}
	for range 10 {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return fmt.Errorf("cgroup v2 delegation: %w", err)
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if _, err := strconv.Atoi(p); err != nil {
				continue
			}
			err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(p), 0o644)
			if err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("cgroup v2 delegation: move pid %s to %s: %w", p, leaf, err)
			}
		}
	}
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup v2 delegation: %w", err)
	}
	var enable []string
	for _, c := range strings.Fields(string(ctrl)) {
		enable = append(enable, "+"+c)
	}
	if len(enable) > 0 {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
			return fmt.Errorf("cgroup v2 delegation: enable controllers in %s: %w", dir, err)
		}
	}
	return nil
}
