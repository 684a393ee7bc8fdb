package gpu

import (
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// MajorsCache keeps the majors read from one root while the NVIDIA
// driver's modules are the ones loaded when they were read.
//
// Why: a process attempt's supervisor reads /proc/devices before every job
// it forks, to deny a job the NVIDIA devices it does not hold (0-GPU jobs:
// all of them), and the kernel builds that file by walking every registered
// major: ~100 µs of CPU, 2% of a throughput run's host CPU. The majors
// change only when a module that registers them is loaded or unloaded:
// nvidia (the GPU major, nvidiactl, caps, nvswitch, nvlink, IMEX channels),
// nvidia_uvm (its major is dynamic), and, as far as we know, nvidia_modeset
// and nvidia_vgpu_vfio. Each has a directory under /sys/module while it is
// loaded, and a reloaded module gets a new one, with a new inode: stat'ing
// them (~3 µs each) tells whether the cached majors still hold. A module
// not in that list that registered an nvidia* major after the read would be
// missed until one of those changed; callers must not modify what Read
// returns. A root without sys/module (a test fixture) is read every time.
type MajorsCache struct {
	mu     sync.Mutex
	root   string
	loaded [len(majorsModules)]moduleID
	m      Majors
	valid  bool
}

// moduleID identifies a module's /sys/module directory (zero: not loaded).
type moduleID struct{ dev, ino uint64 }

// majorsModules are the modules whose load or unload changes the majors.
var majorsModules = [...]string{"nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_vgpu_vfio"}

// Read returns ReadMajors(root), from the cache while the modules are as
// they were. The modules are looked at before the file is read, so a module
// loaded in between makes the next call read again.
func (c *MajorsCache) Read(root string) (Majors, error) {
	sysModule := filepath.Join(root, "sys/module")
	var st unix.Stat_t
	if unix.Stat(sysModule, &st) != nil {
		return ReadMajors(root)
	}
	var loaded [len(majorsModules)]moduleID
	for i, name := range majorsModules {
		if unix.Stat(filepath.Join(sysModule, name), &st) == nil {
			loaded[i] = moduleID{st.Dev, st.Ino}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid && c.root == root && c.loaded == loaded {
		return c.m, nil
	}
	m, err := ReadMajors(root)
	if err != nil {
		c.valid = false
		return m, err
	}
	c.root, c.loaded, c.m, c.valid = root, loaded, m, true
	return m, nil
}
