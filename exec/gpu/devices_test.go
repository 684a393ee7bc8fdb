package gpu

import (
	"slices"
	"strings"
	"testing"

	devconf "github.com/opencontainers/cgroups/devices/config"

	"github.com/foreman-sched/foreman/fsm"
)

// probeDevices is /proc/devices of the H200 probe host (shared/reference/gpu.md).
const probeDevices = `Character devices:
  1 mem
  4 /dev/vc/0
  4 tty
195 nvidia
195 nvidiactl
195 nvidia-modeset
238 nvidia-uvm
239 nvidia-nvswitch
240 nvidia-nvlink
241 nvidia-caps
242 nvidia-caps-imex-channels
254 dimmctl

Block devices:
  7 loop
195 nvidia-not-a-char-device
`

func TestParseMajors(t *testing.T) {
	tests := []struct {
		name, in string
		want     Majors
		err      string
	}{
		{name: "probe", in: probeDevices, want: Majors{GPU: 195, UVM: 238, Other: []int64{239, 240, 241, 242}}},
		{name: "frontend", in: "Character devices:\n195 nvidia-frontend\n", want: Majors{GPU: 195}},
		{name: "no driver", in: "Character devices:\n  1 mem\n\nBlock devices:\n  8 sd\n", want: Majors{}},
		{name: "empty", in: "", want: Majors{}},
		{name: "garbage", in: "Character devices:\nnvidia 195\n", err: `line 2 "nvidia 195"`},
		{name: "major out of range", in: "Character devices:\n99999 nvidia\n", err: "line 2"},
		{name: "no name", in: "Character devices:\n195\n", err: "line 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMajors([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got.GPU != tc.want.GPU || got.UVM != tc.want.UVM || !slices.Equal(got.Other, tc.want.Other) {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func FuzzParseMajors(f *testing.F) {
	f.Add([]byte(probeDevices))
	f.Add([]byte("Character devices:\n195 nvidia\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMajors(b)
		if err != nil {
			return
		}
		for _, x := range append([]int64{m.GPU, m.UVM}, m.Other...) {
			if x < 0 || x > 4095 {
				t.Fatalf("major %d out of range from %q", x, b)
			}
		}
	})
}

func TestDenyRules(t *testing.T) {
	m := Majors{GPU: 195, UVM: 238, Other: []int64{241}}
	denied := func(rules []*devconf.Rule) map[string]bool {
		out := map[string]bool{}
		if r := rules[0]; r.Type != devconf.WildcardDevice || !r.Allow {
			t.Fatalf("first rule %v: want allow-all (a deny list)", r)
		}
		for _, r := range rules[1:] {
			if r.Allow || r.Type != devconf.CharDevice {
				t.Fatalf("rule %v: want char-device denies only", r)
			}
			out[r.CgroupString()] = true
		}
		return out
	}
	none := denied(DenyRules(m, nil))
	if len(none) != 3 || !none["c 195:* rwm"] || !none["c 238:* rwm"] || !none["c 241:* rwm"] {
		t.Errorf("0 GPUs denies %v, want every NVIDIA major whole", none)
	}
	two := denied(DenyRules(m, []fsm.GPU{{Minor: 3}, {Minor: 0}}))
	for _, keep := range []string{"c 195:3 rwm", "c 195:0 rwm", "c 195:255 rwm", "c 238:* rwm", "c 238:0 rwm"} {
		if two[keep] {
			t.Errorf("a job holding minors 0 and 3 is denied %s", keep)
		}
	}
	for _, deny := range []string{"c 195:1 rwm", "c 195:2 rwm", "c 195:4 rwm", "c 195:253 rwm", "c 195:254 rwm", "c 241:* rwm"} {
		if !two[deny] {
			t.Errorf("a job holding minors 0 and 3 is not denied %s", deny)
		}
	}
}

func TestEnv(t *testing.T) {
	a := fsm.GPU{UUID: "GPU-a", Index: 2, Minor: 5}
	b := fsm.GPU{UUID: "GPU-b", Index: 0, Minor: 1}
	base := []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=9", "NVIDIA_VISIBLE_DEVICES=all"}
	tests := []struct {
		name   string
		gpus   []fsm.GPU
		nvidia bool
		ord    Ordinals
		want   []string
	}{
		{"no nvidia, no gpus", nil, false, Relative, base},
		{"zero gpus", nil, true, Relative, []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void", "FOREMAN_GPU_COUNT=0"}},
		{"relative", []fsm.GPU{a, b}, true, Relative, []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=0,1", "CUDA_DEVICE_ORDER=PCI_BUS_ID",
			"NVIDIA_VISIBLE_DEVICES=GPU-b,GPU-a", "FOREMAN_GPU_UUIDS=GPU-b,GPU-a", "FOREMAN_GPU_COUNT=2"}},
		{"host index", []fsm.GPU{a, b}, true, HostIndex, []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=0,2", "CUDA_DEVICE_ORDER=PCI_BUS_ID",
			"NVIDIA_VISIBLE_DEVICES=GPU-b,GPU-a", "FOREMAN_GPU_UUIDS=GPU-b,GPU-a", "FOREMAN_GPU_COUNT=2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Env(base, tc.gpus, tc.nvidia, tc.ord); !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
