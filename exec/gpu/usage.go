package gpu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// What the GPUs are doing, for metrics: one nvidia-smi query per device
// and one per process using a device, each bounded by Config.Timeout.
const (
	UsageFields = "uuid,utilization.gpu,memory.used,temperature.gpu,power.draw,ecc.errors.uncorrected.volatile.total"
	AppFields   = "pid,gpu_uuid,used_memory"
)

// Usage is one device's state; NaN where nvidia-smi cannot say ("[N/A]").
type Usage struct {
	UUID                 string
	UtilPct, MemUsedMiB  float64
	TempC, PowerW, ECCUE float64
}

// AppUsage is one process's memory on one device.
type AppUsage struct {
	PID    int
	UUID   string
	MemMiB float64
}

// ErrNoSMI means there is no nvidia-smi to ask.
var ErrNoSMI = errors.New("no nvidia-smi")

// Sample asks nvidia-smi for every device's usage and every compute
// process's memory.
func Sample(ctx context.Context, cfg Config) ([]Usage, []AppUsage, error) {
	path := findSMI(cfg.NvidiaSMI)
	if path == "" {
		return nil, nil, ErrNoSMI
	}
	r := smiRunner{path: path, timeout: cfg.Timeout}
	b, err := r.run(ctx, "--query-gpu="+UsageFields, "--format=csv,noheader,nounits")
	if err != nil {
		return nil, nil, err
	}
	usage := ParseUsage(b)
	b, err = r.run(ctx, "--query-compute-apps="+AppFields, "--format=csv,noheader,nounits")
	if err != nil {
		return usage, nil, err
	}
	return usage, ParseApps(b), nil
}

// ParseUsage reads --query-gpu=UsageFields rows; a row without a UUID is
// skipped.
func ParseUsage(b []byte) []Usage {
	var out []Usage
	for _, f := range csvRows(b, 6) {
		if !strings.HasPrefix(f[0], "GPU-") {
			continue
		}
		out = append(out, Usage{UUID: f[0], UtilPct: num(f[1]), MemUsedMiB: num(f[2]), TempC: num(f[3]), PowerW: num(f[4]), ECCUE: num(f[5])})
	}
	return out
}

// ParseApps reads --query-compute-apps=AppFields rows.
func ParseApps(b []byte) []AppUsage {
	var out []AppUsage
	for _, f := range csvRows(b, 3) {
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 0 || !strings.HasPrefix(f[1], "GPU-") {
			continue
		}
		out = append(out, AppUsage{PID: pid, UUID: f[1], MemMiB: num(f[2])})
	}
	return out
}

func csvRows(b []byte, n int) [][]string {
	var rows [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) != n {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		rows = append(rows, f)
	}
	return rows
}

// num parses a number; "[N/A]", "[Not Supported]" and garbage are NaN.
func num(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) {
		return math.NaN()
	}
	return v
}

// SampleApps asks nvidia-smi for every compute process's memory only.
func SampleApps(ctx context.Context, cfg Config) ([]AppUsage, error) {
	path := findSMI(cfg.NvidiaSMI)
	if path == "" {
		return nil, ErrNoSMI
	}
	r := smiRunner{path: path, timeout: cfg.Timeout}
	b, err := r.run(ctx, "--query-compute-apps="+AppFields, "--format=csv,noheader,nounits")
	if err != nil {
		return nil, err
	}
	return ParseApps(b), nil
}

// PIDInCgroup reports whether process pid (its /proc read under root) is
// in a cgroup named leaf in any hierarchy: an attempt's processes are in
// cgroups named by its task ID (a process job's device cgroup, a
// container's cgroup), which a job cannot leave.
func PIDInCgroup(root string, pid int, leaf string) bool {
	b, err := os.ReadFile(filepath.Join(root, "proc", strconv.Itoa(pid), "cgroup"))
	if err != nil || leaf == "" {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, el := range strings.Split(parts[2], "/") {
			if el == leaf {
				return true
			}
		}
	}
	return false
}
