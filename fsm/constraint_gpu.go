package fsm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// GPU constraint keys (issue 24). A constraint on one of them is met by a
// device, not a node: a job's GPUs are picked among the node's devices
// that meet all of its GPU constraints, and a node with too few such
// devices does not fit. The "gpu." prefix is reserved: any other key under
// it is an error, so a typo never silently matches nothing.
const (
	GPUModel   = "gpu.model"   // == != in not_in: a word or hyphenated run of the model name, any case
	GPUMemory  = "gpu.memory"  // == != >= <= > <: total memory, "40GiB", "80GB", "81559MiB"; a bare number is MiB
	GPUCompute = "gpu.compute" // == != >= <= > <: compute capability, "8.0", "9.0"
)

var gpuKeys = []string{GPUModel, GPUMemory, GPUCompute}

// IsGPU reports whether the constraint is on the GPUs rather than labels.
func (c Constraint) IsGPU() bool { return strings.HasPrefix(c.Key, "gpu.") }

func isOrdering(op string) bool {
	return op == OpGreaterEqual || op == OpLessEqual || op == OpGreater || op == OpLess
}

// checkGPUConstraint holds GPU keys to their operators and values, and
// ordering operators to GPU keys.
func checkGPUConstraint(c Constraint) error {
	if !c.IsGPU() {
		if isOrdering(c.Op) {
			return fmt.Errorf("%s compares %s and %s only; labels take ==, !=, in, not_in, has, not_has", c.Op, GPUMemory, GPUCompute)
		}
		return nil
	}
	if !slices.Contains(gpuKeys, c.Key) {
		return fmt.Errorf("unknown GPU attribute %s (valid: %s)", c.Key, strings.Join(gpuKeys, ", "))
	}
	switch c.Key {
	case GPUModel:
		if c.Op == OpHas || c.Op == OpNotHas || isOrdering(c.Op) {
			return fmt.Errorf("%s takes ==, !=, in, not_in", c.Key)
		}
	default:
		if c.Op != OpEqual && c.Op != OpNotEqual && !isOrdering(c.Op) {
			return fmt.Errorf("%s takes ==, !=, >=, <=, >, <", c.Key)
		}
		parse := ParseGPUMemory
		if c.Key == GPUCompute {
			parse = parseComputeValue
		}
		if _, err := parse(c.Values[0]); err != nil {
			return fmt.Errorf("%s: %w", c.Key, err)
		}
	}
	return nil
}

// ParseGPUMemory reads a size in MiB: binary units (MiB, GiB, TiB, or M,
// G, T), decimal ones (MB, GB, TB, as vendors name cards: an "80GB" H100
// has 81559 MiB, under 80GiB), or a bare number of MiB.
func ParseGPUMemory(s string) (int64, error) {
	num := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	unit := strings.ToLower(s[len(num):])
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v > 1<<40 {
		return 0, fmt.Errorf("%q: want a size such as 40GiB, 80GB or 81559MiB", s)
	}
	const mib = 1 << 20
	var bytes float64
	switch unit {
	case "", "m", "mi", "mib":
		bytes = v * mib
	case "g", "gi", "gib":
		bytes = v * (1 << 30)
	case "t", "ti", "tib":
		bytes = v * (1 << 40)
	case "mb":
		bytes = v * 1e6
	case "gb":
		bytes = v * 1e9
	case "tb":
		bytes = v * 1e12
	default:
		return 0, fmt.Errorf("%q: unknown unit %q (MiB, GiB, TiB, MB, GB, TB)", s, unit)
	}
	return int64(bytes / mib), nil
}

// parseComputeValue reads "9.0" as 900 (major×100 + minor), so that
// capabilities compare as numbers: 8.9 < 9.0 < 10.0 < 12.1.
func parseComputeValue(s string) (int64, error) {
	a, b, ok := strings.Cut(s, ".")
	if !ok {
		a, b = s, "0"
	}
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || major < 0 || major > 99 || minor < 0 || minor > 99 {
		return 0, fmt.Errorf("%q: want a compute capability such as 8.0 or 9.0", s)
	}
	return int64(major*100 + minor), nil
}

// MatchGPU reports whether device g meets the GPU constraint c. A device
// whose memory or compute capability is unknown (detected without
// nvidia-smi) meets no constraint on it, whatever the operator: unknown
// is never assumed to be enough.
func (c Constraint) MatchGPU(g *GPU) bool {
	switch c.Key {
	case GPUModel:
		in := slices.ContainsFunc(c.Values, func(v string) bool { return modelMatches(g.Model, v) })
		if c.Op == OpEqual || c.Op == OpIn {
			return in
		}
		return !in
	case GPUMemory, GPUCompute:
		var have, want int64
		if c.Key == GPUMemory {
			if g.MemoryMiB <= 0 {
				return false
			}
			have = g.MemoryMiB
			want, _ = ParseGPUMemory(c.Values[0])
		} else {
			var err error
			if have, err = parseComputeValue(g.Compute); err != nil {
				return false
			}
			want, _ = parseComputeValue(c.Values[0])
		}
		switch c.Op {
		case OpEqual:
			return have == want
		case OpNotEqual:
			return have != want
		case OpGreaterEqual:
			return have >= want
		case OpLessEqual:
			return have <= want
		case OpGreater:
			return have > want
		case OpLess:
			return have < want
		}
	}
	return false
}

// modelMatches: v names the model when it is, ignoring case, a run of the
// model's words with spaces written as '-' ("h100" and "H100-80GB" match
// "NVIDIA H100 80GB HBM3"; "a100" matches "NVIDIA A100-SXM4-80GB"), like
// Slurm's GPU type, but never inside a word ("H10" does not match H100).
func modelMatches(model, v string) bool {
	m := strings.ToLower(strings.ReplaceAll(model, " ", "-"))
	v = strings.ToLower(v)
	if v == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(m[i:], v)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(v)
		if (start == 0 || m[start-1] == '-') && (end == len(m) || m[end] == '-') {
			return true
		}
		i = start + 1
	}
}

// GPUsMatching returns the indices into gpus of the healthy devices that
// meet every constraint in cons (the others are ignored).
func GPUsMatching(gpus []GPU, cons []Constraint) []int {
	out := make([]int, 0, len(gpus))
next:
	for i := range gpus {
		if !gpus[i].Healthy() {
			continue
		}
		for _, c := range cons {
			if c.IsGPU() && !c.MatchGPU(&gpus[i]) {
				continue next
			}
		}
		out = append(out, i)
	}
	return out
}
