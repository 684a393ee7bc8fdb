package gpu_test

import (
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu"
)

func TestParsePmon(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want []gpu.ProcSM
	}{
		"driver 580": {`# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command 
# Idx           #    C/G      %      %      %      %      %      %    name 
    0      12345     C     45     12      -      -      -      -    python         
    0      12346     C      -      -      -      -      -      -    python         
    1          -     -      -      -      -      -      -      -    -              
`, []gpu.ProcSM{{GPU: 0, PID: 12345, SMPct: 45}, {GPU: 0, PID: 12346}}},
		"older driver, no header": {"    1       4242     C    12     3     0     0   python\n", []gpu.ProcSM{{GPU: 1, PID: 4242, SMPct: 12}}},
		"columns moved":           {"# pid gpu sm\n 7 2 30\n", []gpu.ProcSM{{GPU: 2, PID: 7, SMPct: 30}}},
		"garbage":                 {"# gpu pid type sm\n0 x C 1\n0 9 C 101\n0 9 C -3\n0 9 C NaN\nshort\n", nil},
	} {
		got := gpu.ParsePmon([]byte(tc.in))
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %+v, want %+v", name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: row %d %+v, want %+v", name, i, got[i], tc.want[i])
			}
		}
	}
	m := gpu.ParseIndexes([]byte("0, GPU-a\n1, GPU-b, NVIDIA H200\nx, GPU-c\n2, nope\n"))
	if len(m) != 2 || m[0] != "GPU-a" || m[1] != "GPU-b" {
		t.Errorf("indexes %v", m)
	}
}

func FuzzParsePmon(f *testing.F) {
	f.Add([]byte("# gpu pid type sm mem enc dec command\n# Idx # C/G % % % % name\n 0 12345 C 45 12 - - python\n"))
	f.Add([]byte("0, GPU-a\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range gpu.ParsePmon(b) {
			if p.PID <= 0 || p.GPU < 0 || !(p.SMPct >= 0 && p.SMPct <= 100) {
				t.Fatalf("row %+v", p)
			}
		}
		for i, u := range gpu.ParseIndexes(b) {
			if i < 0 || len(u) < 4 {
				t.Fatalf("index %d uuid %q", i, u)
			}
		}
	})
}
