package gpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// VRAM share enforcement by the kernel (issue 24). Linux 6.14's dmem
// cgroup v2 controller accounts device memory per cgroup; NVIDIA's driver
// (r615 and later) registers each GPU as a region "nvidia/<pci>/vidmem",
// listed with its size in the root cgroup's dmem.capacity. Where every
// device of the node has a region, a share job's cgroup gets
// dmem.max = "<region> <share bytes>" and allocations past it fail in the
// job, the way memory.max bounds host memory. Elsewhere (older kernels or
// drivers, cgroup v1) the node's watchdog compares sampled use with the
// share instead (exec/gpu_watchdog.go). Everything is read under the GPU
// root, so tests use a fake one.

// CgroupRoot is where the cgroup v2 hierarchy is mounted, under a root.
const CgroupRoot = "sys/fs/cgroup"

// DmemRegion is the dmem region of the device at PCI address bus.
func DmemRegion(bus string) string { return "nvidia/" + strings.ToLower(bus) + "/vidmem" }

// DmemRegions reads <root>/sys/fs/cgroup/dmem.capacity: region → bytes;
// nil (and no error) where the file does not exist.
func DmemRegions(root string) (map[string]int64, error) {
	b, err := os.ReadFile(filepath.Join(root, CgroupRoot, "dmem.capacity"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n < 0 {
			continue
		}
		out[f[0]] = n
	}
	return out, nil
}

// MemoryMode is how a node with gpus holds jobs to their shares: dmem
// when every device has a region in regions, else the watchdog, which
// kills when kill is set. "" for a node without GPUs.
func MemoryMode(gpus []fsm.GPU, regions map[string]int64, kill bool) string {
	if len(gpus) == 0 {
		return ""
	}
	dmem := true
	for _, g := range gpus {
		if _, ok := regions[DmemRegion(g.BusID)]; !ok || g.BusID == "" {
			dmem = false
		}
	}
	switch {
	case dmem:
		return fsm.GPUMemoryDmem
	case kill:
		return fsm.GPUMemoryWatchKill
	}
	return fsm.GPUMemoryWatchReport
}

// DmemMax is the dmem.max line that caps a job at its share, and whether
// the kernel offers it for the share's device (regions from DmemRegions).
func DmemMax(s *fsm.GPUShare, regions map[string]int64) (string, bool) {
	if s == nil || s.GPU.BusID == "" {
		return "", false
	}
	r := DmemRegion(s.GPU.BusID)
	if _, ok := regions[r]; !ok {
		return "", false
	}
	return r + " " + strconv.FormatInt(s.MemoryMiB<<20, 10), true
}

// SetDmemMax caps the cgroup cg (a path inside the v2 hierarchy under
// root) with line: "+dmem" goes into the subtree_control of each ancestor
// that has one (the controller must be enabled down to the job's
// parent), then line into cg's dmem.max. The cgroup is made if missing.
func SetDmemMax(root, cg, line string) error {
	base := filepath.Join(root, CgroupRoot)
	dir := filepath.Join(base, filepath.Clean("/"+cg))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dmem: %w", err)
	}
	for p := base; p != dir; {
		ctl := filepath.Join(p, "cgroup.subtree_control")
		if _, err := os.Stat(ctl); err == nil {
			if err := os.WriteFile(ctl, []byte("+dmem"), 0o644); err != nil {
				return fmt.Errorf("dmem: enable in %s: %w", ctl, err)
			}
		}
		rel, _ := filepath.Rel(p, dir)
		p = filepath.Join(p, strings.Split(rel, string(filepath.Separator))[0])
	}
	if err := os.WriteFile(filepath.Join(dir, "dmem.max"), []byte(line), 0o644); err != nil {
		return fmt.Errorf("dmem: %w", err)
	}
	return nil
}
