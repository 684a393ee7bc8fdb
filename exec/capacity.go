package exec

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// AgentCPUReserve is the CPU the agent keeps for itself (raft, gossip, the
// API, its worker) out of the detected capacity: an eighth of a core per
// core, at most 500m. Jobs placed up to the advertised capacity then leave
// the control plane room (docs/operations.md).
func AgentCPUReserve() int64 { return min(int64(runtime.NumCPU())*125, 500) }

// DetectCapacity returns this host's schedulable capacity: every core as
// 1000 millicores less AgentCPUReserve, and MemTotal from /proc/meminfo in
// MiB. The agent may subtract an operator's reserve before advertising it.
func DetectCapacity() (fsm.Resources, error) {
	res := fsm.Resources{CPU: int64(runtime.NumCPU())*1000 - AgentCPUReserve()}
	mem, err := memTotalMiB("/proc/meminfo")
	if err != nil {
		return res, err
	}
	res.MemoryMB = mem
	return res, nil
}

func memTotalMiB(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: MemTotal %q: %w", path, fields[1], err)
			}
			return kib / 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no MemTotal line", path)
}
