package exec

import (
	"fmt"
	"os"
	"path"
	"syscall"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/fsm"
)

// devicesMount is where device cgroups are made (tests point it at the v2
// hierarchy of a hybrid host).
var devicesMount = gpu.DevicesMount

// hostMajors is the supervisor's cache of the host's NVIDIA majors: read
// again whenever the driver's modules change (gpu.MajorsCache).
var hostMajors gpu.MajorsCache

// processGPU is a process attempt's GPU isolation, decided per attempt from
// <GPURoot>/proc/devices (hostMajors: read again whenever the driver's
// modules change): on a host without NVIDIA devices nothing changes.
// Otherwise the job starts in a device cgroup that denies every NVIDIA
// device it does not hold (a 0-GPU job: all of them), as Slurm's
// ConstrainDevices does, and gets the GPU environment with ordinals
// 0..n-1: CUDA enumerates only the devices the job can open. An agent that
// is not root cannot make cgroups: its jobs see every device, so their
// CUDA_VISIBLE_DEVICES holds the host's indices instead (docs: README GPUs).
func processGPU(t *Task) (env []string, dc *gpu.DeviceCgroup, err error) {
	root := t.GPURoot
	if root == "" {
		root = "/"
	}
	m, err := hostMajors.Read(root)
	if err != nil {
		return nil, nil, err
	}
	if !m.Present() {
		if len(t.GPUs) > 0 {
			return nil, nil, fmt.Errorf("%w: the attempt holds %s but this host has no NVIDIA devices (no nvidia major in %s)", gpu.ErrBadRoot, t.GPUs[0].UUID, path.Join(root, "proc/devices"))
		}
		return t.Env, nil, nil
	}
	if os.Geteuid() != 0 || t.DeviceCgroup == "" {
		return gpu.Env(t.Env, t.GPUs, true, gpu.HostIndex), nil, nil
	}
	mount, v2, err := devicesMount()
	if err != nil {
		return nil, nil, fmt.Errorf("gpu isolation: %w", err)
	}
	dc, err = gpu.NewDeviceCgroup(mount, v2, path.Join(t.DeviceCgroup, t.ID), gpu.DenyRules(m, t.GPUs))
	if err != nil {
		return nil, nil, fmt.Errorf("gpu isolation: %w", err)
	}
	if err := shareDmem(root, path.Join(t.DeviceCgroup, t.ID), t.GPUShare); err != nil {
		dc.Remove()
		return nil, nil, err
	}
	return gpu.Env(t.Env, t.GPUs, true, gpu.Relative), dc, nil
}

// shareDmem caps a share job's device memory at its share where the
// kernel lists its device in dmem.capacity (gpu/dmem.go): in the job's own
// cgroup, cg, of the v2 hierarchy (under root), before the job starts.
// Elsewhere it does nothing: the node's watchdog holds the job to it.
func shareDmem(root, cg string, s *fsm.GPUShare) error {
	if s == nil {
		return nil
	}
	regions, err := gpu.DmemRegions(root)
	if err != nil {
		return fmt.Errorf("gpu memory share: %w", err)
	}
	line, ok := gpu.DmemMax(s, regions)
	if !ok {
		return nil
	}
	if err := gpu.SetDmemMax(root, cg, line); err != nil {
		return fmt.Errorf("gpu memory share: %w", err)
	}
	return nil
}

// warnIfGPUsUnconfined says once, at start, that an agent that is not root
// on an NVIDIA host cannot confine process jobs to their GPUs.
func warnIfGPUsUnconfined(cfg *WorkerConfig, log interface{ Warn(string, ...any) }) {
	root := cfg.GPURoot
	if root == "" {
		root = "/"
	}
	if m, err := gpu.ReadMajors(root); err == nil && m.Present() && os.Geteuid() != 0 {
		log.Warn("not root: process jobs are not confined to their GPUs (every job can open every /dev/nvidia*); CUDA_VISIBLE_DEVICES holds host indices")
	} else if err != nil {
		log.Warn("GPU isolation: cannot read the NVIDIA majors; GPU jobs will fail to start", "err", err)
	}
}

// removeStaleDeviceCgroups removes the device cgroups of process attempts
// whose supervisors died before Destroy (live: the attempts still
// supervised). A cgroup that still holds processes is left alone.
func (w *Worker) removeStaleDeviceCgroups(live map[string]bool) {
	mount, _, err := devicesMount()
	if err != nil || os.Geteuid() != 0 {
		return
	}
	parent := path.Join(mount, w.cfg.deviceCgroup())
	es, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range es {
		if e.IsDir() && !live[e.Name()] {
			// rmdir fails (EBUSY) while the cgroup has members.
			if err := syscall.Rmdir(path.Join(parent, e.Name())); err == nil {
				w.log.Info("removed a stale device cgroup", "cgroup", path.Join(w.cfg.deviceCgroup(), e.Name()))
			}
		}
	}
}

// gpuRoot is where this node's NVIDIA files are read.
func (w *Worker) gpuRoot() string {
	if w.cfg.GPURoot == "" {
		return "/"
	}
	return w.cfg.GPURoot
}
