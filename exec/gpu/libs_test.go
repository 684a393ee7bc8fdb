package gpu_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/exec/gpu/gputest"
)

// TestFindDriverFiles: from the fake host's ldcache, exactly the driver's
// compute libraries of the loaded version (not another version's, not the
// 32-bit copies, not other libraries), with every name the cache knows
// them by, and nvidia-smi.
func TestFindDriverFiles(t *testing.T) {
	h := gputest.Devices(t)
	drv := h.InstallDriver(t, "/bin/true")
	df, err := gpu.FindDriverFiles(h.Dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, l := range df.Libs {
		if filepath.Dir(l.File) != h.Path(gputest.LibDir) || l.Names[0] != filepath.Base(l.File) {
			t.Errorf("lib %+v: want a real file in the fake root's %s, named first by its own name", l, gputest.LibDir)
		}
		got[l.Names[0]] = l.Names[1:]
	}
	for file, names := range drv.Libs {
		slices.Sort(names)
		have := slices.Clone(got[file])
		slices.Sort(have)
		if !slices.Equal(have, names) {
			t.Errorf("%s: names %v, want %v", file, got[file], names)
		}
	}
	if len(got) != len(drv.Libs) {
		t.Errorf("libs %v, want exactly %v", got, drv.Libs)
	}
	if !slices.Equal(df.Bins, []string{drv.SMI}) || df.Version != gputest.Version {
		t.Errorf("bins %v version %q, want [%s] %s", df.Bins, df.Version, drv.SMI, gputest.Version)
	}

	// The merged cache finds each name in the container's lib dir and
	// keeps the image's other entries, but not the image's own libcuda.
	image := gpu.EncodeLDCache([]gpu.LDEntry{
		{Name: "libcuda.so.1", Path: "/usr/local/cuda/compat/libcuda.so.1", Flags: 0x0303},
		{Name: "libc.so.6", Path: "/lib/x86_64-linux-gnu/libc.so.6", Flags: 0x0303},
	})
	merged, err := df.MergeLDCache(image)
	if err != nil {
		t.Fatal(err)
	}
	es, err := gpu.ParseLDCache(merged)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range es {
		lines = append(lines, e.Name+" => "+e.Path)
	}
	for _, want := range []string{"libcuda.so.1 => /usr/local/nvidia/lib64/libcuda.so.1", "libnvidia-ml.so.1 => /usr/local/nvidia/lib64/libnvidia-ml.so.1", "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6"} {
		if !slices.Contains(lines, want) {
			t.Errorf("merged cache %v lacks %s", lines, want)
		}
	}
	if strings.Contains(strings.Join(lines, "\n"), "compat") {
		t.Errorf("merged cache keeps the image's own libcuda: %v", lines)
	}
}

// TestFindDriverFilesErrors: a host whose driver files cannot be found says why.
func TestFindDriverFilesErrors(t *testing.T) {
	root := t.TempDir()
	_, err := gpu.FindDriverFiles(root)
	if err == nil || !strings.Contains(err.Error(), "driver version") {
		t.Errorf("no version file: %v", err)
	}
	os.MkdirAll(filepath.Join(root, "proc/driver/nvidia"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/driver/nvidia/version"), []byte("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n"), 0o644)
	_, err = gpu.FindDriverFiles(root)
	if err == nil || !strings.Contains(err.Error(), "ldcache") {
		t.Errorf("no ldcache: %v", err)
	}
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/ld.so.cache"), gpu.EncodeLDCache(nil), 0o644)
	_, err = gpu.FindDriverFiles(root)
	if err == nil || !strings.Contains(err.Error(), "no driver library *.so.580.159.04") {
		t.Errorf("no libraries: %v", err)
	}
}
