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

// DetectCapacity returns this host's schedulable capacity: every core as
// 1000 millicores and MemTotal from /proc/meminfo in MiB. The agent may
// subtract a reserve before advertising it.
func DetectCapacity() (fsm.Resources, error) {
	res := fsm.Resources{CPU: int64(runtime.NumCPU()) * 1000}
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
