package fsm

import (
	"fmt"
	"maps"
)

// VRAM shares (issue 24). A job asking resources.gpu_memory gets a share
// of one device's memory instead of whole devices: several such jobs run
// on one GPU as long as their shares add up to no more than its memory.
// The leader picks the device (sched/gpu_share.go) and names it in the
// Place entry; Apply checks again that it fits, against the live
// attempts of the node, because an entry is applied on every replica and
// a plan made on a stale view must not over-commit a device.

// GPUShare is an attempt's share of one device.
type GPUShare struct {
	// GPU is a copy of the device (without the node's link matrix), so
	// the node isolates and names it without a lookup.
	GPU GPU `json:"gpu"`
	// MemoryMiB is the share: what the job may use of the device's memory.
	MemoryMiB int64 `json:"memory_mib"`
}

// Devices is every device the attempt may open: its whole GPUs, then its
// shared one. Isolation and the job's CUDA variables use this list.
func (a *Attempt) Devices() []GPU {
	if a.GPUShare == nil {
		return a.GPUs
	}
	out := make([]GPU, 0, len(a.GPUs)+1)
	out = append(out, a.GPUs...)
	return append(out, a.GPUShare.GPU)
}

// gpuHolds is what a node's live attempts hold of its devices, by UUID:
// held whole, or the sum of the shares on it.
type gpuHolds struct {
	whole  map[string]bool
	shared map[string]int64
}

func (h *gpuHolds) add(at *Attempt) {
	for _, g := range at.GPUs {
		h.whole[g.UUID] = true
	}
	if s := at.GPUShare; s != nil {
		h.shared[s.GPU.UUID] += s.MemoryMiB
	}
}

// nodeGPUHolds scans the node's live attempts (this transaction's new
// ones included). Only placements that name a device pay for it.
func (a *applier) nodeGPUHolds(node string) (*gpuHolds, error) {
	h := &gpuHolds{whole: map[string]bool{}, shared: map[string]int64{}}
	prefix := livePrefix(node)
	c := a.live.Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		v := a.attempts.Get(k[len(prefix):])
		if v == nil {
			return nil, fmt.Errorf("%w: live index entry %q names no attempt", ErrCorrupt, k)
		}
		var at Attempt
		if err := decodeAttempt(v, &at); err != nil {
			return nil, err
		}
		h.add(&at)
	}
	return h, nil
}

// placementGPUs checks the devices a placement (or a gang task) names
// against the node and what holds them, and returns the attempt's copies;
// why is non-empty (and nothing is returned) when it must be skipped. A
// device held whole is not shareable, a device with shares is not free
// for a whole-GPU job, and shares never add up past a device's memory.
// holds is nil until a placement names a device: it is read then.
func (a *applier) placementGPUs(n *Node, holds **gpuHolds, uuids []string, share string, mib int64) ([]GPU, *GPUShare, string, error) {
	if (share != "") != (mib > 0) {
		return nil, nil, fmt.Sprintf("gpu_share %q does not match resources.gpu_memory %d", share, mib), nil
	}
	if share != "" && len(uuids) > 0 {
		return nil, nil, "a placement holds whole GPUs or a share, not both", nil
	}
	gpus, why := attemptGPUs(n, uuids)
	if why != "" {
		return nil, nil, why, nil
	}
	var sh *GPUShare
	if share != "" {
		d, why := attemptGPUs(n, []string{share})
		if why != "" {
			return nil, nil, "gpu_share: " + why[len("gpus[0]: "):], nil
		}
		sh = &GPUShare{GPU: d[0], MemoryMiB: mib}
	}
	if len(gpus) == 0 && sh == nil {
		return nil, nil, "", nil
	}
	if *holds == nil {
		h, err := a.nodeGPUHolds(n.Name)
		if err != nil {
			return nil, nil, "", err
		}
		*holds = h
	}
	h := *holds
	for _, g := range gpus {
		switch {
		case h.whole[g.UUID]:
			return nil, nil, fmt.Sprintf("GPU %s on node %s is held by another attempt", g.UUID, n.Name), nil
		case h.shared[g.UUID] > 0:
			return nil, nil, fmt.Sprintf("GPU %s on node %s holds shares (%d MiB)", g.UUID, n.Name, h.shared[g.UUID]), nil
		}
	}
	if sh != nil {
		g := &sh.GPU
		switch {
		case h.whole[g.UUID]:
			return nil, nil, fmt.Sprintf("gpu_share: GPU %s on node %s is held whole by another attempt", g.UUID, n.Name), nil
		case g.MemoryMiB <= 0:
			return nil, nil, fmt.Sprintf("gpu_share: GPU %s on node %s has no known memory", g.UUID, n.Name), nil
		case h.shared[g.UUID]+mib > g.MemoryMiB:
			return nil, nil, fmt.Sprintf("gpu_share: %d MiB does not fit GPU %s on node %s (%d of %d MiB shared)",
				mib, g.UUID, n.Name, h.shared[g.UUID], g.MemoryMiB), nil
		}
	}
	// Later placements of the same entry see this one.
	for _, g := range gpus {
		h.whole[g.UUID] = true
	}
	if sh != nil {
		h.shared[sh.GPU.UUID] += mib
	}
	return gpus, sh, "", nil
}

// clone copies h (nil stays nil: not read yet).
func (h *gpuHolds) clone() *gpuHolds {
	if h == nil {
		return nil
	}
	return &gpuHolds{whole: maps.Clone(h.whole), shared: maps.Clone(h.shared)}
}

// How a node holds jobs to their VRAM shares (Node.GPUMemoryMode).
const (
	// GPUMemoryDmem: the kernel's dmem cgroup controller caps each job's
	// device memory at its share (dmem.max).
	GPUMemoryDmem = "dmem"
	// GPUMemoryWatchReport: a watchdog compares each job's sampled device
	// memory with its share and emits an event when it stays over.
	GPUMemoryWatchReport = "watchdog-report"
	// GPUMemoryWatchKill: the watchdog also stops the attempt.
	GPUMemoryWatchKill = "watchdog-kill"
)

func validGPUMemoryMode(m string) bool {
	switch m {
	case "", GPUMemoryDmem, GPUMemoryWatchReport, GPUMemoryWatchKill:
		return true
	}
	return false
}
