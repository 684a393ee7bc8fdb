package fsm

import (
	"errors"
	"strings"
	"testing"
)

func TestGPUConstraints(t *testing.T) {
	h100 := GPU{UUID: "GPU-1", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, Compute: "9.0"}
	a100 := GPU{UUID: "GPU-2", Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, Compute: "8.0"}
	bare := GPU{UUID: "GPU-3", Model: "NVIDIA H200"} // detected without nvidia-smi
	tests := []struct {
		c                string
		h100, a100, bare bool
	}{
		{"gpu.model == h100", true, false, false},
		{"gpu.model == H100-80GB", true, false, false},
		{"gpu.model == nvidia-h100-80gb-hbm3", true, false, false},
		{"gpu.model == H10", false, false, false},
		{"gpu.model == a100", false, true, false},
		{"gpu.model in (a100,h200)", false, true, true},
		{"gpu.model != h100", false, true, true},
		{"gpu.model not_in (h100,h200)", false, true, false},
		{"gpu.memory >= 40GiB", true, true, false},
		{"gpu.memory > 40GiB", true, false, false},
		{"gpu.memory >= 80GiB", false, false, false}, // 80 GiB is 81920 MiB: an "80GB" card has less
		{"gpu.memory >= 80GB", true, false, false},
		{"gpu.memory < 50000", false, true, false},
		{"gpu.memory == 40960MiB", false, true, false},
		{"gpu.memory != 40960", true, false, false}, // unknown memory meets nothing
		{"gpu.compute >= 8.0", true, true, false},
		{"gpu.compute >= 8.9", true, false, false},
		{"gpu.compute < 9", false, true, false},
		{"gpu.compute>=10.0", false, false, false},
	}
	for _, tt := range tests {
		c, err := ParseConstraint(tt.c)
		if err != nil {
			t.Fatalf("%s: %v", tt.c, err)
		}
		if !c.IsGPU() {
			t.Fatalf("%s: not a GPU constraint", tt.c)
		}
		for _, x := range []struct {
			g    GPU
			want bool
		}{{h100, tt.h100}, {a100, tt.a100}, {bare, tt.bare}} {
			if got := c.MatchGPU(&x.g); got != x.want {
				t.Errorf("%s on %s: %v, want %v", tt.c, x.g.Model, got, x.want)
			}
		}
		if again, err := ParseConstraint(c.String()); err != nil || again.String() != c.String() {
			t.Errorf("%s: round trip via %q: %v", tt.c, c.String(), err)
		}
	}
}

func TestGPUConstraintErrors(t *testing.T) {
	for in, want := range map[string]string{
		"gpu.vram >= 40GiB":    "unknown GPU attribute gpu.vram (valid: gpu.model, gpu.memory, gpu.compute)",
		"has gpu.model":        "gpu.model takes ==, !=, in, not_in",
		"gpu.model >= h100":    "gpu.model takes ==, !=, in, not_in",
		"gpu.memory in (1,2)":  "gpu.memory takes ==, !=, >=, <=, >, <",
		"gpu.memory >= 40XB":   `gpu.memory: "40XB": unknown unit "xb"`,
		"gpu.memory >= lots":   `gpu.memory: "lots": want a size`,
		"gpu.compute >= nine":  `gpu.compute: "nine": want a compute capability`,
		"gpu.compute >= 9.0.1": `gpu.compute: "9.0.1"`,
		"zone > 3":             "> compares gpu.memory and gpu.compute only",
	} {
		_, err := ParseConstraint(in)
		if err == nil || !errors.Is(err, ErrBadConstraint) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConstraint(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

func TestGPUsMatching(t *testing.T) {
	gpus := []GPU{
		{UUID: "a", MemoryMiB: 40960, Compute: "8.0"},
		{UUID: "b", MemoryMiB: 81559, Compute: "9.0", Health: "xid 79"},
		{UUID: "c", MemoryMiB: 81559, Compute: "9.0"},
	}
	cons, err := ParseConstraints([]string{"zone == a", "gpu.memory >= 80GB"})
	if err != nil {
		t.Fatal(err)
	}
	if got := GPUsMatching(gpus, cons); len(got) != 1 || got[0] != 2 {
		t.Fatalf("GPUsMatching = %v, want [2] (b is unhealthy, a too small; labels ignored)", got)
	}
}
