package fsm

import (
	"fmt"
	"reflect"
	"strconv"
)

// Node GPU event names (issue 24): "node.gpu_added" and so on; Reason
// names the device.
const (
	NameGPUAdded     = "gpu_added"     // a device appeared
	NameGPURemoved   = "gpu_removed"   // a device vanished
	NameGPUUnhealthy = "gpu_unhealthy" // a device turned unhealthy (Reason says why)
	NameGPUHealthy   = "gpu_healthy"   // an unhealthy device recovered
	// NameGPUMismatch: the node's gpu capacity (--resource gpu=N) is not
	// its number of healthy detected devices.
	NameGPUMismatch = "gpu_mismatch"
)

// maxNodeGPUs bounds a node's device list (an HGX has 8, a GB200 NVL72
// tray 4; MIG instances would add up to 7 per device).
const maxNodeGPUs = 256

func (a *applier) nodeGPUs(p *NodeGPUs, res *Result) error {
	if err := validKey("name", p.Name, maxIDLen); err != nil {
		return err
	}
	if err := validGPUs("gpus", p.GPUs); err != nil {
		return err
	}
	n, err := a.getNode(p.Name)
	if err != nil {
		return err
	}
	if !validGPUMemoryMode(p.GPUMemoryMode) {
		return fmt.Errorf("%w: gpu_memory_mode: %q (want %s, %s, %s or empty)", ErrBadCommand, p.GPUMemoryMode,
			GPUMemoryDmem, GPUMemoryWatchReport, GPUMemoryWatchKill)
	}
	if reflect.DeepEqual(n.GPUs, p.GPUs) && n.GPUDriver == p.GPUDriver && n.CUDAVersion == p.CUDAVersion &&
		n.GPUMemoryMode == p.GPUMemoryMode {
		return nil // an agent's start says what the record holds: no event
	}
	old := n.GPUs
	n.GPUs, n.GPUDriver, n.CUDAVersion, n.GPUMemoryMode = p.GPUs, p.GPUDriver, p.CUDAVersion, p.GPUMemoryMode
	if err := a.saveNode(n, NameUpdated); err != nil {
		return err
	}
	a.gpuEvents(n, old)
	return a.gpuErrorPolicy(n, old)
}

// validGPUs checks a node's device list: bounded, UUIDs present and
// distinct, each link row as long as the list.
func validGPUs(field string, gpus []GPU) error {
	if len(gpus) > maxNodeGPUs {
		return fmt.Errorf("%w: %s: %d devices, at most %d", ErrBadCommand, field, len(gpus), maxNodeGPUs)
	}
	seen := make(map[string]bool, len(gpus))
	for i, g := range gpus {
		f := field + "[" + strconv.Itoa(i) + "]"
		if err := validKey(f+".uuid", g.UUID, maxIDLen); err != nil {
			return err
		}
		if seen[g.UUID] {
			return fmt.Errorf("%w: %s.uuid: %s listed twice", ErrBadCommand, f, g.UUID)
		}
		seen[g.UUID] = true
		if g.Links != nil && len(g.Links) != len(gpus) {
			return fmt.Errorf("%w: %s.links: %d entries for %d devices", ErrBadCommand, f, len(g.Links), len(gpus))
		}
	}
	return nil
}

// gpuEvents emits what changed between a node's old and new device lists,
// in the new list's order then the old's, and a mismatch between the
// node's gpu capacity and its healthy devices when either side changed.
func (a *applier) gpuEvents(n *Node, old []GPU) {
	byUUID := make(map[string]*GPU, len(old))
	for i := range old {
		byUUID[old[i].UUID] = &old[i]
	}
	ev := func(name string, g *GPU, why string) {
		r := g.UUID + " (index " + strconv.Itoa(g.Index) + ", " + g.Model + ")"
		if why != "" {
			r += ": " + why
		}
		a.emit(Event{Type: EventNode, Name: name, Node: n.Name, State: string(n.Gossip), Reason: r})
	}
	changed := len(old) != len(n.GPUs)
	for i := range n.GPUs {
		g := &n.GPUs[i]
		o := byUUID[g.UUID]
		switch {
		case o == nil:
			ev(NameGPUAdded, g, g.Health)
			changed = true
		case o.Healthy() && !g.Healthy():
			ev(NameGPUUnhealthy, g, g.Health)
			changed = true
		case !o.Healthy() && g.Healthy():
			ev(NameGPUHealthy, g, "")
			changed = true
		}
		delete(byUUID, g.UUID)
	}
	for i := range old {
		if _, gone := byUUID[old[i].UUID]; gone {
			ev(NameGPURemoved, &old[i], "")
		}
	}
	if !changed || len(n.GPUs) == 0 {
		return
	}
	healthy := int64(0)
	for _, g := range n.GPUs {
		if g.Healthy() {
			healthy++
		}
	}
	if c := n.Capacity.Named["gpu"]; c != healthy {
		a.emit(Event{Type: EventNode, Name: NameGPUMismatch, Node: n.Name, State: string(n.Gossip),
			Reason: fmt.Sprintf("gpu capacity %d, %d healthy devices detected", c, healthy)})
	}
}

// attemptGPUs copies the devices a placement names from its node: each
// must be one of the node's, healthy, and named once. The scheduler picked
// them free; a stale or hand-made entry that names others is skipped.
func attemptGPUs(n *Node, uuids []string) ([]GPU, string) {
	if len(uuids) == 0 {
		return nil, ""
	}
	out := make([]GPU, 0, len(uuids))
	for i, u := range uuids {
		var g *GPU
		for j := range n.GPUs {
			if n.GPUs[j].UUID == u {
				g = &n.GPUs[j]
				break
			}
		}
		switch {
		case g == nil:
			return nil, fmt.Sprintf("gpus[%d]: node %s has no GPU %s", i, n.Name, u)
		case !g.Healthy():
			return nil, fmt.Sprintf("gpus[%d]: GPU %s on node %s is unhealthy: %s", i, u, n.Name, g.Health)
		}
		for _, prev := range uuids[:i] {
			if prev == u {
				return nil, fmt.Sprintf("gpus[%d]: GPU %s named twice", i, u)
			}
		}
		c := *g
		c.Links = nil // the node's matrix; the attempt needs the device
		out = append(out, c)
	}
	return out, ""
}
