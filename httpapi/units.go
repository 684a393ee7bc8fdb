package httpapi

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Resource bounds: far above any real machine, low enough that sums over a
// cluster cannot overflow int64.
const (
	MaxCPUMillis = 1_000_000        // 1000 cores
	MaxMemoryMiB = 16 * 1024 * 1024 // 16 TiB
	MaxNamed     = 1_000_000
)

// ParseCPU reads a CPU quantity into millicores: "500m" (millicores),
// "0.5" or "2" (cores, when there is a dot or the value is below 64) and
// "500" (millicores, a bare integer of 64 or more). The split at 64 keeps
// "--cpu 2" meaning two cores and "--cpu 500" meaning half a core; write
// "64000m" or "64.0" for 64 cores.
func ParseCPU(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty CPU quantity")
	}
	if m, ok := strings.CutSuffix(s, "m"); ok {
		v, err := strconv.ParseInt(m, 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%q is not a CPU quantity (want e.g. 500m, 0.5 or 2)", s)
		}
		return v, nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil && !strings.Contains(s, ".") {
		if v < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		if v < 64 {
			return v * 1000, nil
		}
		return v, nil
	}
	// Only plain decimals: the unit of a CPU number depends on how it is
	// written, so "1e3", "0x10" or "1_000" (which ParseFloat takes) would
	// be guesses.
	if !plainDecimal(s) {
		return 0, fmt.Errorf("%q is not a CPU quantity (want e.g. 500m, 0.5 or 2)", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a CPU quantity (want e.g. 500m, 0.5 or 2)", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	if f > MaxCPUMillis/1000 {
		return 0, fmt.Errorf("%q is more than %d cores", s, MaxCPUMillis/1000)
	}
	return int64(math.Round(f * 1000)), nil
}

// plainDecimal reports whether s is digits with at most one '.', after an
// optional sign.
func plainDecimal(s string) bool {
	s = strings.TrimLeft(s, "+-")
	digits, dots := 0, 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// memUnits are the suffixes ParseMemory knows, as a factor of bytes. The
// decimal ones (MB, GB) are read as their binary cousins: nobody means
// 976.5625 MiB when they type 1GB for a job.
var memUnits = []struct {
	suffix string
	bytes  float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40},
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// ParseMemory reads a memory quantity into MiB: "256MiB", "1GiB", "1.5G",
// "512M"; a bare number is MiB. Byte amounts round up to a whole MiB.
func ParseMemory(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty memory quantity")
	}
	num, factor := s, float64(1<<20)
	low := strings.ToLower(s)
	for _, u := range memUnits {
		if strings.HasSuffix(low, u.suffix) {
			num, factor = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.bytes
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a memory quantity (want e.g. 256MiB, 1GiB or 512)", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	mib := math.Ceil(f * factor / (1 << 20))
	if mib > MaxMemoryMiB {
		return 0, fmt.Errorf("%q is more than 16TiB", s)
	}
	return int64(mib), nil
}

// FormatCPU renders millicores the way ParseCPU reads them back: whole
// cores as "2", or "64.0" from 64 cores on (a bare "64" is millicores).
func FormatCPU(m int64) string {
	if m%1000 == 0 {
		if m/1000 >= 64 {
			return strconv.FormatInt(m/1000, 10) + ".0"
		}
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}

// FormatMemory renders MiB with the largest binary unit that divides it.
func FormatMemory(mib int64) string {
	switch {
	case mib != 0 && mib%(1<<20) == 0:
		return strconv.FormatInt(mib>>20, 10) + "TiB"
	case mib != 0 && mib%(1<<10) == 0:
		return strconv.FormatInt(mib>>10, 10) + "GiB"
	}
	return strconv.FormatInt(mib, 10) + "MiB"
}
