package cluster

import (
	"context"
	"fmt"
	"maps"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/wallclock"
)

// SetGPUs records what this node's GPU detection found (issue 24): the
// device list goes to the leader in a NodeGPUs entry, since gossip meta
// (512 bytes) cannot carry it, and capacity, when not nil, becomes the
// gpu count gossip advertises. It fails while this node has no record
// yet (the leader writes it when gossip first brings the node): the
// caller tries again.
func (n *Node) SetGPUs(ctx context.Context, gpus []fsm.GPU, driver, cuda, memoryMode string, capacity *int64) error {
	n.selfMu.Lock()
	n.self.GPUs, n.self.GPUDriver, n.self.CUDAVersion, n.self.GPUMemoryMode = gpus, driver, cuda, memoryMode
	if capacity != nil {
		named := maps.Clone(n.self.Capacity.Named)
		if named == nil {
			named = map[string]int64{}
		}
		named["gpu"] = *capacity
		if *capacity == 0 {
			delete(named, "gpu")
		}
		n.self.Capacity.Named = named
	}
	n.selfMu.Unlock()
	if err := n.refreshMeta(); err != nil {
		return fmt.Errorf("gossip the gpu capacity: %w", err)
	}
	cmd, err := fsm.NewCommand(fsm.CmdNodeGPUs, wallclock.Now(), fsm.NodeGPUs{Name: n.cfg.Name, GPUs: gpus, GPUDriver: driver, CUDAVersion: cuda, GPUMemoryMode: memoryMode})
	if err != nil {
		return err
	}
	res, err := n.Apply(ctx, cmd)
	if err != nil {
		return err
	}
	return res.Err
}
