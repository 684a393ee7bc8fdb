package gpu_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/exec/gpu/gputest"
)

// seeds adds every fixture host's copy of file to the corpus.
func seeds(f *testing.F, pattern string) {
	matches, _ := filepath.Glob(filepath.Join(gputest.Dir(f), "*", pattern))
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil {
			f.Add(b)
		}
	}
}

// The parsers read what a driver or nvidia-smi prints: garbage must give
// an error or nothing, never a panic, and what they accept must hold up.
func FuzzParseInformation(f *testing.F) {
	seeds(f, "gpus/*.information")
	f.Fuzz(func(t *testing.T, b []byte) {
		pg, err := gpu.ParseInformation(b)
		if err != nil {
			return
		}
		if bus, err := gpu.NormalizeBusID(pg.BusID); err != nil || bus != pg.BusID {
			t.Fatalf("accepted bus %q is not normalized (%v)", pg.BusID, err)
		}
		if pg.Minor < 0 || pg.Minor > 254 {
			t.Fatalf("accepted minor %d", pg.Minor)
		}
	})
}

func FuzzParseQuery(f *testing.F) {
	seeds(f, "query.csv")
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _ := gpu.ParseQuery(b)
		for _, r := range rows {
			if r.Compute != "" {
				if _, _, err := gpu.ParseCompute(r.Compute); err != nil {
					t.Fatalf("accepted compute %q: %v", r.Compute, err)
				}
			}
			if r.MemoryMiB < 0 || r.Index < 0 {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

func FuzzParseTopo(f *testing.F) {
	seeds(f, "topo.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		links, err := gpu.ParseTopo(b)
		if err != nil {
			return
		}
		for i, row := range links {
			if len(row) != len(links) || row[i] != "X" {
				t.Fatalf("row %d of %d: %q", i, len(links), row)
			}
		}
	})
}

func FuzzParseMisc(f *testing.F) {
	seeds(f, "version")
	seeds(f, "devices")
	seeds(f, "q-compute.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		gpu.ParseDriverVersion(b)
		gpu.ParseVersions(b)
		for name, m := range gpu.ParseDevices(b) {
			if m < 0 || name == "" {
				t.Fatalf("device %q major %d", name, m)
			}
		}
	})
}
