package gpu

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
)

// Per-process SM use: `nvidia-smi pmon -c 1 -s u` samples each compute
// process's share of the device's SM time over about a second (NVML's
// process utilization samples, the per-process view dcgm-exporter lacks
// under sharing). Its columns depend on the driver (newer ones add jpg
// and ofa), so they are found by the header line:
//
//	# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command
//	# Idx           #    C/G      %      %      %      %      %      %    name
//	    0      12345     C     45     12      -      -      -      -    python

// ProcSM is one process's SM use on the device with nvidia-smi index GPU.
type ProcSM struct {
	GPU   int
	PID   int
	SMPct float64 // 0 when pmon printed "-" (no sample: the process ran no kernel)
}

// ParsePmon reads pmon's output; rows without a process ("-" pid) or with
// unreadable numbers are skipped.
func ParsePmon(b []byte) []ProcSM {
	gpuCol, pidCol, smCol := 0, 1, 3 // the order every driver has printed so far
	var out []ProcSM
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			f := strings.Fields(rest)
			if col(f, "gpu") >= 0 && col(f, "pid") >= 0 && col(f, "sm") >= 0 {
				gpuCol, pidCol, smCol = col(f, "gpu"), col(f, "pid"), col(f, "sm")
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) <= max(gpuCol, pidCol, smCol) {
			continue
		}
		idx, err1 := strconv.Atoi(f[gpuCol])
		pid, err2 := strconv.Atoi(f[pidCol])
		if err1 != nil || err2 != nil || idx < 0 || pid <= 0 {
			continue
		}
		sm := 0.0
		if f[smCol] != "-" {
			v, err := strconv.ParseFloat(f[smCol], 64)
			if err != nil || !(v >= 0 && v <= 100) { // NaN too
				continue
			}
			sm = v
		}
		out = append(out, ProcSM{GPU: idx, PID: pid, SMPct: sm})
	}
	return out
}

func col(fields []string, name string) int {
	for i, f := range fields {
		if strings.EqualFold(f, name) {
			return i
		}
	}
	return -1
}

// ParseIndexes reads `--query-gpu=index,uuid` rows into index → UUID.
func ParseIndexes(b []byte) map[int]string {
	out := map[int]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) < 2 {
			continue
		}
		idx, err := strconv.Atoi(strings.TrimSpace(f[0]))
		uuid := strings.TrimSpace(f[1])
		if err != nil || idx < 0 || !strings.HasPrefix(uuid, "GPU-") {
			continue
		}
		out[idx] = uuid
	}
	return out
}

// SampleSM asks nvidia-smi for every compute process's SM use, by device
// UUID (pmon names devices by index, so a second call maps them).
func SampleSM(ctx context.Context, cfg Config) (map[string][]ProcSM, error) {
	path := findSMI(cfg.NvidiaSMI)
	if path == "" {
		return nil, ErrNoSMI
	}
	r := smiRunner{path: path, timeout: cfg.Timeout}
	b, err := r.run(ctx, "pmon", "-c", "1", "-s", "u")
	if err != nil {
		return nil, err
	}
	procs := ParsePmon(b)
	out := map[string][]ProcSM{}
	if len(procs) == 0 {
		return out, nil
	}
	b, err = r.run(ctx, "--query-gpu=index,uuid", "--format=csv,noheader,nounits")
	if err != nil {
		return nil, err
	}
	uuids := ParseIndexes(b)
	for _, p := range procs {
		if u, ok := uuids[p.GPU]; ok {
			out[u] = append(out[u], p)
		}
	}
	return out, nil
}
