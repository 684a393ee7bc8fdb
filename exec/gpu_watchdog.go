package exec

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/fsm"
)

// The VRAM watchdog (issue 24). Where the kernel does not cap a share job's
// device memory (no dmem controller: gpu/dmem.go), the node samples what
// each share job uses, every GPUMemoryWatchEvery while any runs: the
// compute processes nvidia-smi lists on the job's device, whose cgroup is
// the attempt's own (the device cgroup of a process job, a container's
// cgroup). A job over its share plus a slack for longer than
// GPUMemoryGrace is reported once per attempt (an attempt.gpu_memory_over
// event) and, with GPUMemoryKill, stopped: killed with the reason
// "gpu_memory: N MiB used of a M MiB share on GPU-…". Like a sampled OOM
// check it is not a hard limit: a job can exceed its share between samples
// and crowd its neighbours until it is stopped.

// What the watchdog does about a job over its share (--gpu-memory-over).
const (
	GPUMemoryReport = "report"
	GPUMemoryKill   = "kill"
)

// Defaults of the watchdog's timing: a share job must stay over for more
// than 10 s (a framework's allocator can briefly overshoot while it
// frees), sampled every 2 s (one nvidia-smi call, only while share jobs
// run).
const (
	DefaultGPUMemoryWatchEvery = 2 * time.Second
	DefaultGPUMemoryGrace      = 10 * time.Second
)

// gpuMemorySlack is how far over its share a job may go unnoticed: 5% of
// the share, at least 256 MiB (a CUDA context alone takes a few hundred
// MiB, which nvidia-smi counts).
func gpuMemorySlack(share int64) int64 { return max(share/20, 256) }

// overWatch remembers, per attempt, since when it has been over and
// whether it was reported. Pure: the caller gives the time.
type overWatch struct {
	grace time.Duration
	since map[string]time.Time
	fired map[string]bool
}

func newOverWatch(grace time.Duration) *overWatch {
	return &overWatch{grace: grace, since: map[string]time.Time{}, fired: map[string]bool{}}
}

// observe records one sample of attempt id and reports whether it has now
// been over for more than the grace, the first time only.
func (o *overWatch) observe(now time.Time, id string, over bool) bool {
	if !over {
		delete(o.since, id)
		return false
	}
	t, ok := o.since[id]
	if !ok {
		o.since[id] = now
		return false
	}
	if o.fired[id] || now.Sub(t) <= o.grace {
		return false
	}
	o.fired[id] = true
	return true
}

// keep forgets attempts not in live.
func (o *overWatch) keep(live map[string]bool) {
	for id := range o.since {
		if !live[id] {
			delete(o.since, id)
		}
	}
	for id := range o.fired {
		if !live[id] {
			delete(o.fired, id)
		}
	}
}

// shareRun is a running share attempt the watchdog looks after.
type shareRun struct {
	r     *attemptRun
	at    *fsm.Attempt
	share *fsm.GPUShare
}

// shareRuns are the attempts of this node holding a share that dmem does
// not cap. The kernel's dmem regions are read only when a share runs.
func (w *Worker) shareRuns() []shareRun {
	w.mu.Lock()
	runs := make([]*attemptRun, 0, len(w.runs))
	for _, r := range w.runs {
		runs = append(runs, r)
	}
	w.mu.Unlock()
	var out []shareRun
	for _, r := range runs {
		r.mu.Lock()
		at, gone := r.share, r.gone
		r.mu.Unlock()
		if at != nil && !gone {
			out = append(out, shareRun{r: r, at: at, share: at.GPUShare})
		}
	}
	if len(out) == 0 {
		return nil
	}
	regions, _ := gpu.DmemRegions(w.gpuRoot())
	return slices.DeleteFunc(out, func(s shareRun) bool {
		_, capped := gpu.DmemMax(s.share, regions)
		return capped
	})
}

// watchGPUMemory runs the watchdog until ctx ends.
func (w *Worker) watchGPUMemory(ctx context.Context) {
	o := newOverWatch(w.cfg.GPUMemoryGrace)
	t := time.NewTicker(w.cfg.GPUMemoryWatchEvery)
	defer t.Stop()
	cfg := gpu.Config{Root: w.cfg.GPURoot, NvidiaSMI: w.cfg.NvidiaSMI, Timeout: gpuSampleTimeout}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runs := w.shareRuns()
		live := make(map[string]bool, len(runs))
		for _, s := range runs {
			live[s.r.id] = true
		}
		o.keep(live)
		if len(runs) == 0 {
			continue
		}
		apps, err := gpu.SampleApps(ctx, cfg)
		if err != nil {
			w.log.Debug("gpu memory watchdog: no sample", "err", err)
			continue
		}
		now := time.Now()
		for _, s := range runs {
			used := w.shareUse(apps, s)
			over := used > s.share.MemoryMiB+gpuMemorySlack(s.share.MemoryMiB)
			if o.observe(now, s.r.id, over) {
				w.overShare(ctx, s, used)
			}
		}
	}
}

// shareUse sums the memory the attempt's processes use on its device:
// those whose cgroup is the attempt's own.
func (w *Worker) shareUse(apps []gpu.AppUsage, s shareRun) int64 {
	var mib float64
	for _, a := range apps {
		if a.UUID != s.share.GPU.UUID || math.IsNaN(a.MemMiB) {
			continue
		}
		if gpu.PIDInCgroup(w.gpuRoot(), a.PID, s.r.id) {
			mib += a.MemMiB
		}
	}
	return int64(mib)
}

// overShare reports the attempt over its share and, in kill mode, stops it.
func (w *Worker) overShare(ctx context.Context, s shareRun, used int64) {
	a := s.at
	o := &fsm.GPUMemoryOver{UUID: s.share.GPU.UUID, UsedMiB: used, ShareMiB: s.share.MemoryMiB, Action: w.cfg.GPUMemoryOver}
	w.log.Warn("job over its GPU memory share", "job", a.JobID, "attempt", a.Num, "gpu", o.UUID,
		"used_mib", used, "share_mib", o.ShareMiB, "action", o.Action)
	rep := fsm.ReportAttempt{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken, Node: w.cfg.Node,
		State: fsm.ReportGPUMemoryOver, GPUMemoryOver: o}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		// The event first: once the attempt is killed a report about it
		// would be stale.
		_ = w.report(ctx, rep)
		if w.cfg.GPUMemoryOver == GPUMemoryKill {
			s.r.stopLocally(o.String())
		}
	}()
}
