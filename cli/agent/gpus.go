package agent

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/fsm"
)

// GPU detection in the agent (issue 24): at start (selfDescription), then
// every gpuRedetect and on SIGHUP. A change (a device appearing, vanishing
// or changing health, a new driver) is published: a server commits a
// NodeGPUs entry through the leader, a client says its hello again on its
// work stream. The leader turns the differences into node events.

// gpuRedetect is how often the agent looks at its GPUs again.
const gpuRedetect = 30 * time.Second

// gpuRetry is how soon a publish that failed (no leader yet, this node's
// record not written yet) is tried again.
const gpuRetry = 2 * time.Second

// gpuState is one detection as the node record carries it.
type gpuState struct {
	GPUs         []fsm.GPU
	Driver, CUDA string
	MemoryMode   string // how VRAM shares are held (fsm.Node.GPUMemoryMode)
	Capacity     *int64 // the gpu count to advertise; nil: --resource gpu=N holds it
}

// detectGPUs runs detection and logs what it could not read.
func detectGPUs(ctx context.Context, cfg gpu.Config, override *int64, logger *slog.Logger) gpuState {
	inv := gpu.Detect(ctx, cfg)
	for _, w := range inv.Warnings {
		logger.Warn("gpu detection", "component", "gpu", "warning", w)
	}
	st := gpuState{GPUs: inv.GPUs, Driver: inv.Driver, CUDA: inv.CUDA}
	regions, err := gpu.DmemRegions(cfg.Root)
	if err != nil {
		logger.Warn("gpu detection: dmem.capacity", "component", "gpu", "err", err)
	}
	st.MemoryMode = gpu.MemoryMode(inv.GPUs, regions, cfg.KillOverShare)
	healthy := int64(inv.Healthy())
	if override != nil {
		if len(inv.GPUs) > 0 && *override != healthy {
			logger.Warn("--resource gpu differs from the detected GPUs: the flag wins", "component", "gpu",
				"resource_gpu", *override, "healthy_gpus", healthy, "detected", len(inv.GPUs))
		}
	} else {
		st.Capacity = &healthy
	}
	return st
}

func (s gpuState) same(o gpuState) bool {
	return reflect.DeepEqual(s.GPUs, o.GPUs) && s.Driver == o.Driver && s.CUDA == o.CUDA && s.MemoryMode == o.MemoryMode &&
		reflect.DeepEqual(s.Capacity, o.Capacity)
}

// apply writes the detection into a node record.
func (s gpuState) apply(n *fsm.Node) {
	n.GPUs, n.GPUDriver, n.CUDAVersion, n.GPUMemoryMode = s.GPUs, s.Driver, s.CUDA, s.MemoryMode
	if s.Capacity == nil {
		return
	}
	named := make(map[string]int64, len(n.Capacity.Named)+1)
	for k, v := range n.Capacity.Named {
		named[k] = v
	}
	delete(named, "gpu")
	if *s.Capacity > 0 {
		named["gpu"] = *s.Capacity
	}
	if len(named) == 0 {
		named = nil
	}
	n.Capacity.Named = named
}

// watchGPUs re-detects until ctx ends and publishes each change; the
// first publish (of initial, the start's detection) is retried until it
// succeeds, since a server's record may not exist yet. resets brings the
// node record's operator health resets (gpu_reset.go); one newer than
// doneReset clears its devices' XID faults and publishes a new detection
// at once, even one equal to the last published (the record may say
// otherwise since).
func watchGPUs(ctx context.Context, cfg gpu.Config, override *int64, initial gpuState,
	resets <-chan fsm.GPUReset, doneReset uint64,
	publish func(context.Context, gpuState) error, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	xids, kick := gpu.NewXIDHealth(xidQuiet), make(chan struct{}, 1)
	go watchXIDs(ctx, cfg.Root, xids, kick, logger)
	published, pending := gpuState{}, &initial
	detected := initial.GPUs // the latest detection's devices
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			logger.Info("SIGHUP: detecting GPUs again", "component", "gpu")
		case <-kick:
		case <-timer.C:
		case r := <-resets:
			if r.Index <= doneReset {
				continue
			}
			doneReset = r.Index
			n := xids.Forget(busesOf(detected, r.UUIDs))
			logger.Info("gpu health reset", "component", "gpu", "uuids", strings.Join(r.UUIDs, ","), "by", r.By, "xid_faults_cleared", n)
			published, pending = gpuState{}, nil
		}
		if pending == nil {
			st := detectGPUs(ctx, cfg, override, logger)
			detected = st.GPUs
			st.withXIDs(xids)
			if !st.same(published) {
				pending = &st
			}
		}
		next := gpuRedetect
		if pending != nil {
			if err := publish(ctx, *pending); err != nil {
				if ctx.Err() != nil {
					return
				}
				logger.Debug("gpu publish failed; retrying", "component", "gpu", "err", err)
				next = gpuRetry
			} else {
				logger.Info("gpus published", "component", "gpu", "gpus", len(pending.GPUs), "driver", pending.Driver, "cuda", pending.CUDA)
				published, pending = *pending, nil
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// busesOf maps UUIDs to the PCI addresses the XID health is kept by.
func busesOf(gpus []fsm.GPU, uuids []string) []string {
	var out []string
	for _, g := range gpus {
		if slices.Contains(uuids, g.UUID) {
			out = append(out, g.BusID)
		}
	}
	return out
}

// watchGPUResets feeds out the operator health resets of this server's
// own node record, read from its state after each batch that wrote a node
// record, until ctx ends. It returns the record's reset at the start,
// which the agent does not redo: its XID faults began empty.
func watchGPUResets(ctx context.Context, f *fsm.FSM, node string, out chan fsm.GPUReset) uint64 {
	read := func() *fsm.GPUReset {
		var r *fsm.GPUReset
		_ = f.View(func(tx *fsm.Tx) error {
			if n, err := tx.Node(node); err == nil {
				r = n.GPUReset
			}
			return nil
		})
		return r
	}
	ch, stop := f.Watch()
	var start uint64
	if r := read(); r != nil {
		start = r.Index
	}
	go func() {
		defer stop()
		seen, version := start, f.NodesVersion()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
			}
			if v := f.NodesVersion(); v == version {
				continue
			} else {
				version = v
			}
			if r := read(); r != nil && r.Index > seen {
				seen = r.Index
				latest(out, *r)
			}
		}
	}()
	return start
}
