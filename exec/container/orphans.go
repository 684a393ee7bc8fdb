package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer"

	"github.com/foreman-sched/foreman/exec"
)

// orphanKillTimeout bounds how long CleanupOrphans waits for a SIGKILLed
// container (no longer our child) to stop before destroying it.
const orphanKillTimeout = 10 * time.Second

// CleanupOrphans removes every container in the state root whose id is not
// in live: Load, SIGKILL, wait until stopped, Destroy (which removes its
// cgroups and state dir). It then removes empty leftover cgroup dirs under
// CgroupParent that are not live. Call it when a node starts, because
// ParentDeathSignal does not protect jobs from a killed foreman.
func (d *Driver) CleanupOrphans(live map[string]bool) error {
	var errs []error
	entries, err := os.ReadDir(d.cfg.containersDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || live[id] {
			continue
		}
		if err := d.destroyOrphan(id); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.removeStaleCgroups(live); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (d *Driver) destroyOrphan(id string) error {
	c, err := libcontainer.Load(d.cfg.containersDir(), id)
	if err != nil {
		// Unloadable state (e.g. half-written): drop it; its cgroup, if
		// any, is handled by removeStaleCgroups once empty.
		d.log.Warn("orphan state unloadable; removing", "id", id, "err", err)
		return os.RemoveAll(filepath.Join(d.cfg.containersDir(), id))
	}
	_ = c.Signal(killSignal)
	deadline := time.Now().Add(orphanKillTimeout)
	for {
		st, err := c.Status()
		if err != nil || st == libcontainer.Stopped {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("orphan %s: still %s %s after SIGKILL", id, st, orphanKillTimeout)
		}
		time.Sleep(10 * time.Millisecond) // polling a process we cannot wait for
	}
	if err := c.Destroy(); err != nil {
		return fmt.Errorf("orphan %s: destroy: %w", id, err)
	}
	d.log.Info("orphan container removed", "id", id)
	return nil
}

// removeStaleCgroups rmdirs non-live children of CgroupParent in every
// hierarchy. rmdir only succeeds on empty cgroups, so nothing running is
// touched.
func (d *Driver) removeStaleCgroups(live map[string]bool) error {
	var dirs []string
	if cgroups.IsCgroup2UnifiedMode() {
		dirs = []string{filepath.Join(cgroup2Root, d.cgroupParent)}
	} else {
		mounts, err := cgroups.GetCgroupMounts(false)
		if err != nil {
			return err
		}
		for _, m := range mounts {
			dirs = append(dirs, filepath.Join(m.Mountpoint, d.cgroupParent))
		}
		if cgroups.IsCgroup2HybridMode() {
			dirs = append(dirs, filepath.Join(cgroup2Root, "unified", d.cgroupParent))
		}
	}
	var errs []error
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // hierarchy without our parent
		}
		for _, e := range entries {
			if !e.IsDir() || live[e.Name()] || e.Name() == supervisorLeaf || e.Name() == exec.ProcessJobsLeaf {
				continue
			}
			if err := cgroups.RemovePath(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("stale cgroup %s: %w", filepath.Join(dir, e.Name()), err))
			}
		}
	}
	return errors.Join(errs...)
}
