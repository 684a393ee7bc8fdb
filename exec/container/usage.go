package container

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
)

// usage is what the cgroup recorded about a finished attempt.
type usage struct {
	oomKills   uint64
	peakMemory int64
	cpuNs      int64
}

// readUsage reads the OOM-kill counter (v1 memory.oom_control oom_kill,
// v2 memory.events oom_kill), peak memory and CPU time. It must run before
// Destroy removes the cgroup. Missing files (old kernels) read as zero.
func readUsage(cg *cgroups.Cgroup, paths map[string]string) usage {
	var u usage
	if m, err := manager.NewWithPaths(cg, paths); err == nil {
		u.oomKills, _ = m.OOMKillCount()
	}
	if cgroups.IsCgroup2UnifiedMode() {
		dir := paths[""]
		u.peakMemory = readInt(filepath.Join(dir, "memory.peak"))
		u.cpuNs = readKey(filepath.Join(dir, "cpu.stat"), "usage_usec") * 1000
		return u
	}
	u.peakMemory = readInt(filepath.Join(paths["memory"], "memory.max_usage_in_bytes"))
	u.cpuNs = readInt(filepath.Join(paths["cpuacct"], "cpuacct.usage"))
	return u
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// readKey reads "key value" lines such as cpu.stat.
func readKey(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
