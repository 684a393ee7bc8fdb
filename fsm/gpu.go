package fsm

import (
	"strconv"
	"strings"
)

// GPU is one device a node advertises. Detection on the node fills it
// (exec/gpu); it lives in the node's record so the leader can pick exact
// devices, and a copy of each picked one goes with the attempt so the node
// can isolate it without looking anything up.
type GPU struct {
	UUID string `json:"uuid"` // "GPU-0d6f…": stable across reboots and index changes
	// Index is nvidia-smi's index, which is CUDA's under
	// CUDA_DEVICE_ORDER=PCI_BUS_ID.
	Index int `json:"index"`
	// Minor is the N of /dev/nvidiaN (the character device's minor number);
	// it need not equal Index.
	Minor     int    `json:"minor"`
	BusID     string `json:"bus_id,omitempty"`     // PCI address, "0000:19:00.0"
	Model     string `json:"model,omitempty"`      // "NVIDIA H200"
	MemoryMiB int64  `json:"memory_mib,omitempty"` // total memory
	Compute   string `json:"compute,omitempty"`    // compute capability, "9.0"
	// Health is "" for a healthy device, else why it is not
	// ("xid 79: fallen off the bus"); the leader places nothing on it.
	Health string `json:"health,omitempty"`
	// Links[i] is how this device reaches the node's device with Index i, as
	// `nvidia-smi topo -m` prints it ("X", "NV18", "PIX", "SYS"); nil when
	// unknown. The leader prefers sets joined by NVLink.
	Links []string `json:"links,omitempty"`
}

// Healthy reports whether the leader may place work on g.
func (g GPU) Healthy() bool { return g.Health == "" }

// LinkScore ranks a link type for the placer: more bonded NVLinks first,
// then the PCIe paths from the closest (PIX) to the farthest (SYS), as
// go-gpuallocator's best-effort policy does. Unknown links score 0.
func LinkScore(link string) int {
	switch link {
	case "PIX":
		return 50
	case "PXB":
		return 40
	case "PHB":
		return 30
	case "NODE":
		return 20
	case "SYS":
		return 10
	}
	if n, ok := nvlinks(link); ok {
		return 100 + n
	}
	return 0
}

// nvlinks reads "NV<n>".
func nvlinks(link string) (int, bool) {
	rest, ok := strings.CutPrefix(link, "NV")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0 && n < 1000
}
