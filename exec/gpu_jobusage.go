package exec

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/exec/gpu"
)

// Per-job GPU use for `job status` and the UI (issue 24): what one job's
// processes hold and do on the devices its attempt holds, measured on the
// node that runs it from the metrics' own nvidia-smi sample (at most 5 s
// old, so a UI polling every few seconds costs no extra calls). It is
// node-local and never replicated: any node's API proxies the read here,
// as it does for logs.

// JobGPUDevice is one device of an attempt: the memory of the job's
// compute processes on it and their share of its SM time; nil where
// nvidia-smi could not say.
type JobGPUDevice struct {
	UUID        string
	MemoryBytes *int64
	SMRatio     *float64
}

// ErrNoGPUSampling means this node's worker samples no GPUs (no NVIDIA
// devices, or no worker).
var ErrNoGPUSampling = errors.New("this node samples no GPUs")

// JobGPUUsage measures job's processes on node's devices uuids. The time
// is the sample's; note says why a value is missing ("" when none is).
func JobGPUUsage(node, job string, uuids []string) (devs []JobGPUDevice, at time.Time, note string, err error) {
	c := gpuUsage()
	c.mu.Lock()
	s := c.nodes[node]
	c.mu.Unlock()
	if s == nil {
		return nil, time.Time{}, "", fmt.Errorf("%w (node %s)", ErrNoGPUSampling, node)
	}
	s.mu.Lock()
	s.sample()
	apps, sm, appsErr, smErr, at := s.apps, s.sm, s.err, s.smErr, s.at
	s.mu.Unlock()
	mem := map[string]float64{}
	for _, a := range apps {
		if slices.Contains(uuids, a.UUID) && !math.IsNaN(a.MemMiB) && gpu.JobOfPID(s.cfg.Root, a.PID) == job {
			mem[a.UUID] += a.MemMiB * (1 << 20)
		}
	}
	smr := map[string]float64{}
	for uuid, procs := range sm {
		for _, p := range procs {
			if slices.Contains(uuids, uuid) && gpu.JobOfPID(s.cfg.Root, p.PID) == job {
				smr[uuid] += p.SMPct / 100
			}
		}
	}
	for _, u := range uuids {
		d := JobGPUDevice{UUID: u}
		if appsErr == nil {
			m := int64(mem[u])
			d.MemoryBytes = &m
		}
		if smErr == nil {
			r := smr[u]
			d.SMRatio = &r
		}
		devs = append(devs, d)
	}
	var notes []string
	if appsErr != nil {
		notes = append(notes, "memory: "+appsErr.Error())
	}
	if smErr != nil {
		notes = append(notes, "sm: "+smErr.Error())
	}
	return devs, at, strings.Join(notes, "; "), nil
}
