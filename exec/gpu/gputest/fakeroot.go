package gputest

// Devices builds a fake GPU root for isolation tests: a directory laid out
// like a host with an NVIDIA driver (/proc/devices, /proc/driver/nvidia,
// /dev) whose "GPUs" are ordinary character devices of the machine running
// the test, so the kernel's device cgroup really allows or denies them.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/fsm"
)

// Stand-ins: the virtual-console memory devices (vcs, major 7) are real,
// harmless to open and absent from a container's default device list. The
// fake /proc/devices names major 7 "nvidia-frontend", so /dev/nvidia<m> is
// 7:<m>: GPU index 0 is minor 1 (/dev/vcs1) and index 1 minor 0 (/dev/vcs),
// so index and minor differ, as they may on real hosts. nvidiactl is 7:255
// and nvidia-uvm UVMMajor:0, which no driver serves: opening them gives
// ENXIO where the cgroup allows them and EPERM where it denies them.
const (
	GPUMajor = 7
	UVMMajor = 511
	Version  = "580.159.04"
)

// Host is a fake GPU root with working device nodes.
type Host struct {
	Dir  string
	GPUs []fsm.GPU // the node's devices, by index
}

// Devices builds a fake root with two GPUs in a fresh directory. It needs root
// (mknod) and the stand-in devices; without them it skips, or fails under
// CI=true.
func Devices(t testing.TB) *Host {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "fake GPU devices need root (mknod)")
	}
	for _, p := range []string{"/dev/vcs", "/dev/vcs1"} {
		f, err := os.Open(p)
		if err != nil {
			Unavailable(t, fmt.Sprintf("stand-in GPU device %s: %v", p, err))
		}
		f.Close()
	}
	dir, err := os.MkdirTemp("", "gpuroot")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // process jobs may run as nobody
		t.Fatal(err)
	}
	r := &Host{Dir: dir, GPUs: []fsm.GPU{
		{UUID: "GPU-00000000-0000-0000-0000-00000000000a", Index: 0, Minor: 1, BusID: "0000:00:06.0", Model: "NVIDIA H200", MemoryMiB: 143771, Compute: "9.0"},
		{UUID: "GPU-00000000-0000-0000-0000-00000000000b", Index: 1, Minor: 0, BusID: "0000:00:07.0", Model: "NVIDIA H200", MemoryMiB: 143771, Compute: "9.0"},
	}}
	r.write(t, "proc/devices", fmt.Sprintf("Character devices:\n  1 mem\n  %d nvidia-frontend\n %d nvidia-uvm\n\nBlock devices:\n  7 loop\n", GPUMajor, UVMMajor))
	r.write(t, "proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "+Version+"  Release Build  (dvs-builder@U22-I3-AE18-23-3)  Thu Oct 30 05:51:10 UTC 2025\nGCC version:  gcc version 12.3.0\n")
	for _, g := range r.GPUs {
		r.write(t, "proc/driver/nvidia/gpus/"+g.BusID+"/information", fmt.Sprintf("Model: \t\t %s\nIRQ:   \t\t 0\nGPU UUID: \t %s\nVideo BIOS: \t 96.00.af.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n", g.Model, g.UUID, g.BusID, g.Minor))
		r.write(t, "sys/bus/pci/devices/"+g.BusID+"/vendor", "0x10de\n")
		r.mknod(t, fmt.Sprintf("dev/nvidia%d", g.Minor), GPUMajor, g.Minor)
	}
	r.mknod(t, "dev/nvidiactl", GPUMajor, 255)
	r.mknod(t, "dev/nvidia-uvm", UVMMajor, 0)
	r.mknod(t, "dev/nvidia-uvm-tools", UVMMajor, 1)
	return r
}

// Path is p under the root.
func (r *Host) Path(p string) string { return filepath.Join(r.Dir, p) }

func (r *Host) write(t testing.TB, p, content string) {
	t.Helper()
	full := r.Path(p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *Host) mknod(t testing.TB, p string, major, minor int) {
	t.Helper()
	full := r.Path(p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(full, unix.S_IFCHR|0o666, int(unix.Mkdev(uint32(major), uint32(minor)))); err != nil {
		t.Fatal(err)
	}
	os.Chmod(full, 0o666) // mknod's mode is cut by the umask
}

// Unavailable skips t for a missing capability, or fails it under CI=true
// (a green CI must never hide a skipped suite).
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %s", why)
	}
	t.Skipf("SKIPPED (loudly): %s", why)
}

// OpenScript is the shell snippet a job runs to report
// whether it could open each path, one "<path> ok|<errno text>" line each.
func OpenScript(paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "if (exec 3<%s) 2>/dev/null; then echo %s ok; else echo %s $( (exec 3<%s) 2>&1 | sed 's/.*: //'); fi\n", p, p, p, p)
	}
	return b.String()
}

// Driver lists the fake driver files InstallDriver lays out.
type Driver struct {
	// Libs maps each library's real file (in LibDir) to the names the
	// ldcache looks it up by.
	Libs map[string][]string
	// Decoys are files a container must not get: a library of another
	// driver version and a 32-bit copy.
	Decoys []string
	SMI    string // the host path of nvidia-smi
}

// LibDir is where the fake driver's libraries live, as on Debian hosts.
const LibDir = "/usr/lib/x86_64-linux-gnu"

// InstallDriver lays out the driver's user-space side in the root: the
// compute libraries as <name>.so.<Version> with their SONAME symlinks, an
// ldcache listing them (and a decoy of another version, a 32-bit copy and a
// library that is not the driver's), and smi (an executable to copy) as
// /usr/bin/nvidia-smi.
func (r *Host) InstallDriver(t testing.TB, smi string) Driver {
	t.Helper()
	d := Driver{Libs: map[string][]string{
		"libcuda.so." + Version:      {"libcuda.so.1", "libcuda.so"},
		"libnvidia-ml.so." + Version: {"libnvidia-ml.so.1"},
	}}
	var entries []gpu.LDEntry
	for file, names := range d.Libs {
		r.write(t, LibDir+"/"+file, "fake "+file)
		for _, n := range names {
			if err := os.Symlink(file, r.Path(LibDir+"/"+n)); err != nil {
				t.Fatal(err)
			}
			entries = append(entries, gpu.LDEntry{Name: n, Path: LibDir + "/" + n, Flags: 0x0303})
		}
	}
	r.write(t, LibDir+"/libnvidia-cfg.so.470.57", "another driver's")
	r.write(t, "/usr/lib/i386-linux-gnu/libnvidia-ml.so."+Version, "32-bit")
	r.write(t, LibDir+"/libz.so.1", "not the driver's")
	d.Decoys = []string{"libnvidia-cfg.so.470.57", "libnvidia-cfg.so.1"}
	entries = append(entries,
		gpu.LDEntry{Name: "libnvidia-cfg.so.1", Path: LibDir + "/libnvidia-cfg.so.470.57", Flags: 0x0303},
		gpu.LDEntry{Name: "libnvidia-ml.so.1", Path: "/usr/lib/i386-linux-gnu/libnvidia-ml.so." + Version, Flags: 0x0003},
		gpu.LDEntry{Name: "libz.so.1", Path: LibDir + "/libz.so.1", Flags: 0x0303},
	)
	r.write(t, "etc/ld.so.cache", string(gpu.EncodeLDCache(entries)))
	b, err := os.ReadFile(smi)
	if err != nil {
		t.Fatal(err)
	}
	d.SMI = r.Path("usr/bin/nvidia-smi")
	r.write(t, "usr/bin/nvidia-smi", string(b))
	if err := os.Chmod(d.SMI, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
