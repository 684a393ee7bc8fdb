// Detection finds the NVIDIA GPUs of this host without cgo (issue 24).
//
// The floor is what the kernel driver publishes: one
// /proc/driver/nvidia/gpus/<bus>/information per device (model, UUID, PCI
// address, the minor of /dev/nvidiaN), /proc/driver/nvidia/version and
// /proc/devices, as Slurm's AutoDetect=nvidia reads them. nvidia-smi, when
// found, adds memory, compute capability, nvidia-smi's index, the driver and
// CUDA versions and the link matrix (`topo -m`). NVML through cgo is not an
// option: the binary is static, and NVIDIA's Go binding crashes when linked
// statically. Every path is under Config.Root so tests run on a fake root.

package gpu

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Config says where detection looks.
type Config struct {
	// Root prefixes every /proc, /sys and /dev path ("" or "/": the host).
	Root string
	// NvidiaSMI is nvidia-smi's path; "" searches PATH, then
	// /usr/local/nvidia/bin (where GPU cloud images keep it off PATH).
	NvidiaSMI string
	// Timeout bounds each nvidia-smi call: a hung driver must not hang
	// the agent. A full sweep takes about 0.6 s on an H200.
	Timeout time.Duration
	// KillOverShare: the node's VRAM watchdog stops a job over its share
	// (--gpu-memory-over kill); it goes into the mode the node advertises.
	KillOverShare bool
}

// DefaultConfig is the host with a 10 s bound per nvidia-smi call.
func DefaultConfig() Config { return Config{Timeout: 10 * time.Second} }

// Inventory is what one detection found.
type Inventory struct {
	GPUs   []fsm.GPU // by Index
	Driver string    // driver version, "580.159.04"; "" without a driver
	CUDA   string    // highest CUDA version the driver supports, "13.0"
	SMI    string    // the nvidia-smi that answered; "" when none did
	// Warnings say what could not be read (garbage, nvidia-smi failing or
	// hanging); detection carries on with what it has.
	Warnings []string
}

// Healthy counts the devices the leader may place on.
func (inv *Inventory) Healthy() int {
	n := 0
	for _, g := range inv.GPUs {
		if g.Healthy() {
			n++
		}
	}
	return n
}

// ProcGPU is one device as /proc/driver/nvidia describes it.
type ProcGPU struct {
	Model, UUID, BusID string
	Minor              int
	Excluded           bool
}

// Detect reads the driver's files and then nvidia-smi. It never fails: a
// host without the driver has no GPUs, and what could not be read is in
// Warnings.
func Detect(ctx context.Context, cfg Config) Inventory {
	var inv Inventory
	warn := func(format string, args ...any) { inv.Warnings = append(inv.Warnings, fmt.Sprintf(format, args...)) }
	procDir := rootPath(cfg.Root, "/proc/driver/nvidia")
	entries, err := os.ReadDir(filepath.Join(procDir, "gpus"))
	if err != nil {
		if !os.IsNotExist(err) {
			warn("%v", err)
		}
		return inv // no driver loaded: no GPUs, and nvidia-smi would only fail
	}
	if b, err := os.ReadFile(filepath.Join(procDir, "version")); err == nil {
		inv.Driver = ParseDriverVersion(b)
	}
	if _, err := os.Stat(rootPath(cfg.Root, "/proc/devices")); err == nil {
		if majors, err := ReadDevices(rootPath(cfg.Root, "/proc/devices")); err != nil {
			warn("%v", err)
		} else if _, ok := majors["nvidia-frontend"]; !ok && majors["nvidia"] == 0 && majors["nvidiactl"] == 0 {
			warn("/proc/devices has no nvidia character device: the driver's device files cannot work")
		}
	}
	var found []ProcGPU
	for _, e := range entries {
		path := filepath.Join(procDir, "gpus", e.Name(), "information")
		b, err := os.ReadFile(path)
		if err != nil {
			warn("%v", err)
			continue
		}
		pg, err := ParseInformation(b)
		if err != nil {
			warn("%s: %v", path, err)
			continue
		}
		if v := readTrim(rootPath(cfg.Root, "/sys/bus/pci/devices/"+pg.BusID+"/vendor")); v != "" && v != "0x10de" {
			warn("%s: PCI vendor %s is not NVIDIA's (0x10de): ignored", pg.BusID, v)
			continue
		}
		found = append(found, pg)
	}
	// nvidia-smi numbers devices in PCI bus order; so does CUDA under
	// CUDA_DEVICE_ORDER=PCI_BUS_ID. Without nvidia-smi that order is the index.
	slices.SortFunc(found, func(a, b ProcGPU) int { return strings.Compare(a.BusID, b.BusID) })
	gpus := make([]fsm.GPU, len(found))
	for i, pg := range found {
		gpus[i] = fsm.GPU{UUID: pg.UUID, Index: i, Minor: pg.Minor, BusID: pg.BusID, Model: pg.Model}
		if pg.Excluded {
			gpus[i].Health = "excluded by the driver (NVreg_ExcludedGpus)"
		}
	}
	inv.GPUs = gpus
	if len(gpus) == 0 {
		return inv
	}
	smi := findSMI(cfg.NvidiaSMI)
	if smi == "" {
		if cfg.NvidiaSMI != "" {
			warn("--nvidia-smi %s: not an executable file", cfg.NvidiaSMI)
		}
		return inv
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultConfig().Timeout
	}
	r := smiRunner{path: smi, timeout: timeout}
	out, err := r.run(ctx, "--query-gpu="+QueryFields, "--format=csv,noheader,nounits")
	if err != nil {
		warn("%v", err)
		return inv
	}
	rows, bad := ParseQuery(out)
	for _, b := range bad {
		warn("nvidia-smi --query-gpu: %s", b)
	}
	inv.SMI = smi
	mergeQuery(&inv, rows, warn)
	if out, err := r.run(ctx, "-q", "-d", "COMPUTE"); err != nil {
		warn("%v", err)
	} else if d, c := ParseVersions(out); c != "" || d != "" {
		inv.CUDA = c
		if inv.Driver == "" {
			inv.Driver = d
		}
	}
	if len(inv.GPUs) > 1 {
		out, err := r.run(ctx, "topo", "-m")
		if err != nil {
			warn("%v", err)
		} else if links, err := ParseTopo(out); err != nil {
			warn("nvidia-smi topo -m: %v", err)
		} else {
			applyLinks(inv.GPUs, links, warn)
		}
	}
	return inv
}

// mergeQuery fills the /proc devices with nvidia-smi's rows, matched by
// PCI address. A /proc device nvidia-smi does not list is unhealthy: the
// driver knows it, but it does not answer.
func mergeQuery(inv *Inventory, rows []QueryRow, warn func(string, ...any)) {
	byBus := make(map[string]QueryRow, len(rows))
	for _, r := range rows {
		byBus[r.BusID] = r
	}
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		r, ok := byBus[g.BusID]
		if !ok {
			if g.Health == "" {
				g.Health = "not listed by nvidia-smi"
			}
			continue
		}
		delete(byBus, g.BusID)
		if r.UUID != "" && r.UUID != g.UUID {
			warn("%s: nvidia-smi says UUID %s, /proc says %s: keeping /proc's", g.BusID, r.UUID, g.UUID)
		}
		g.Index, g.MemoryMiB, g.Compute = r.Index, r.MemoryMiB, r.Compute
		if r.Model != "" {
			g.Model = r.Model
		}
		if inv.Driver == "" {
			inv.Driver = r.Driver
		}
	}
	for _, bus := range slices.Sorted(maps.Keys(byBus)) {
		warn("nvidia-smi lists %s, which /proc/driver/nvidia does not: ignored", bus)
	}
	slices.SortFunc(inv.GPUs, func(a, b fsm.GPU) int {
		if a.Index != b.Index {
			return a.Index - b.Index
		}
		return strings.Compare(a.BusID, b.BusID)
	})
}

// applyLinks gives each device its row of the matrix. topo -m numbers
// devices as nvidia-smi does (GPU<Index>); a matrix of another size is
// dropped rather than trusted.
func applyLinks(gpus []fsm.GPU, links [][]string, warn func(string, ...any)) {
	if len(links) != len(gpus) {
		warn("nvidia-smi topo -m: a %d-device matrix for %d devices: ignored", len(links), len(gpus))
		return
	}
	for i := range gpus {
		if idx := gpus[i].Index; idx >= 0 && idx < len(links) {
			gpus[i].Links = links[idx]
		}
	}
}

// ParseInformation reads one /proc/driver/nvidia/gpus/<bus>/information.
func ParseInformation(b []byte) (ProcGPU, error) {
	var pg ProcGPU
	minor := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Model":
			pg.Model = v
		case "GPU UUID":
			pg.UUID = v
		case "Bus Location":
			pg.BusID = v
		case "Device Minor":
			minor = v
		case "GPU Excluded":
			pg.Excluded = strings.EqualFold(v, "yes")
		}
	}
	if err := sc.Err(); err != nil {
		return pg, err
	}
	if !validUUID(pg.UUID) {
		return pg, fmt.Errorf("GPU UUID %q: want GPU-<hex and dashes>", pg.UUID)
	}
	bus, err := NormalizeBusID(pg.BusID)
	if err != nil {
		return pg, fmt.Errorf("Bus Location: %w", err)
	}
	pg.BusID = bus
	n, err := strconv.Atoi(minor)
	if err != nil || n < 0 || n > 254 { // 255 is nvidiactl
		return pg, fmt.Errorf("Device Minor %q: want 0..254", minor)
	}
	pg.Minor = n
	if !printable(pg.Model) {
		return pg, fmt.Errorf("Model %q: not printable text", pg.Model)
	}
	return pg, nil
}

// ParseDriverVersion finds the version in /proc/driver/nvidia/version's
// NVRM line ("... for x86_64  580.159.04  Release Build ...").
func ParseDriverVersion(b []byte) string {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("NVRM version:")) {
		return ""
	}
	for _, f := range strings.Fields(string(line)) {
		if isVersion(f) {
			return f
		}
	}
	return ""
}

// ReadDevices maps /proc/devices' character device names to majors
// ("nvidia-uvm" → 238: the uvm major is dynamic).
func ReadDevices(path string) (map[string]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseDevices(b), nil
}

// ParseDevices reads /proc/devices' "Character devices:" section.
func ParseDevices(b []byte) map[string]int {
	out := map[string]int{}
	char := false
	for line := range strings.SplitSeq(string(b), "\n") {
		switch strings.TrimSpace(line) {
		case "Character devices:":
			char = true
			continue
		case "Block devices:":
			char = false
		}
		f := strings.Fields(line)
		if !char || len(f) != 2 {
			continue
		}
		if m, err := strconv.Atoi(f[0]); err == nil && m >= 0 {
			if _, seen := out[f[1]]; !seen {
				out[f[1]] = m
			}
		}
	}
	return out
}

// NormalizeBusID writes a PCI address as /proc and sysfs do: a 4-digit
// domain, lowercase ("00000000:2A:00.0" from nvidia-smi → "0000:2a:00.0").
func NormalizeBusID(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	dom, rest, ok := strings.Cut(s, ":")
	if !ok || len(dom) < 4 {
		return "", fmt.Errorf("%q: want DOMAIN:BUS:DEVICE.FUNCTION", s)
	}
	if strings.Trim(dom[:len(dom)-4], "0") != "" {
		return "", fmt.Errorf("%q: the domain does not fit 4 digits", s)
	}
	dom = dom[len(dom)-4:]
	bus, df, ok := strings.Cut(rest, ":")
	dev, fn, ok2 := strings.Cut(df, ".")
	if !ok || !ok2 || len(bus) != 2 || len(dev) != 2 || len(fn) != 1 || !isHex(dom+bus+dev+fn) {
		return "", fmt.Errorf("%q: want DOMAIN:BUS:DEVICE.FUNCTION in hex", s)
	}
	return dom + ":" + bus + ":" + dev + "." + fn, nil
}

func rootPath(root, p string) string {
	if root == "" || root == "/" {
		return p
	}
	return filepath.Join(root, p)
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func validUUID(s string) bool {
	rest, ok := strings.CutPrefix(s, "GPU-")
	if !ok || len(rest) < 8 || len(rest) > 64 {
		return false
	}
	return isHex(strings.ReplaceAll(rest, "-", ""))
}

func isHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return s != ""
}

// isVersion: digits and dots, starting with digit.dot ("580.159.04", "13.0").
func isVersion(s string) bool {
	if !strings.Contains(s, ".") || s[0] < '0' || s[0] > '9' || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if r != '.' && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	if len(s) > 128 {
		return false
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || r == 0xfffd {
			return false
		}
	}
	return true
}
