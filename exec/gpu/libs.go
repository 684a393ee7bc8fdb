package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// Where a container finds the driver's files: the nvidia-docker v1 layout,
// which nvidia/cuda images already search (LD_LIBRARY_PATH and PATH
// "required for nvidia-docker v1").
const (
	ContainerLibDir = "/usr/local/nvidia/lib64"
	ContainerBinDir = "/usr/local/nvidia/bin"
)

// computeLibs are the driver libraries CUDA, NVML and PyTorch need (the
// toolkit's compute and utility sets); video and graphics ones are left out.
var computeLibs = []string{
	"libcuda", "libcudadebugger", "libnvidia-ml", "libnvidia-cfg", "libnvidia-ptxjitcompiler",
	"libnvidia-nvvm", "libnvidia-gpucomp", "libnvidia-allocator", "libnvidia-pkcs11",
	"libnvidia-pkcs11-openssl3", "libnvidia-opencl", "libnvidia-nscq",
}

// driverBins are the driver's utilities, looked for in binDirs in order.
var (
	driverBins = []string{"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}
	binDirs    = []string{"/usr/local/nvidia/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"}
)

// Lib is one driver library a container gets.
type Lib struct {
	File  string   // the real file on the host (below the GPU root)
	Names []string // its names in ContainerLibDir: its own, then those the ldcache looks up ("libcuda.so.1")
	Flags int32    // the ldcache's type and architecture flags
}

// DriverFiles are the driver's user-space files for containers.
type DriverFiles struct {
	Version string
	Libs    []Lib
	Bins    []string // host paths (below the GPU root)
}

// FindDriverFiles finds the driver's libraries the way the loader would,
// from <root>/etc/ld.so.cache, keeping only files named *.so.<driver
// version> (the toolkit's rule: a stale or foreign libcuda is never taken),
// the first of each name in cache order (a host may list every library
// twice, as the probe host does), and its utilities from the usual bin
// directories. A host without a driver version has no files to give.
func FindDriverFiles(root string) (*DriverFiles, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/driver/nvidia/version"))
	if err != nil {
		return nil, fmt.Errorf("%w: driver version: %v", ErrBadRoot, err)
	}
	version := ParseDriverVersion(b)
	if version == "" {
		return nil, fmt.Errorf("%w: no driver version in %s", ErrBadRoot, filepath.Join(root, "proc/driver/nvidia/version"))
	}
	cache, err := os.ReadFile(filepath.Join(root, "etc/ld.so.cache"))
	if err != nil {
		return nil, fmt.Errorf("%w: the driver's libraries are found from the ldcache: %v", ErrBadRoot, err)
	}
	entries, err := ParseLDCache(cache)
	if err != nil {
		return nil, err
	}
	df := &DriverFiles{Version: version}
	byFile := map[string]int{} // real basename -> index in df.Libs
	for _, e := range entries {
		if !archOK(e.Flags) || e.HWCap&hwcapExtension != 0 || !slices.Contains(computeLibs, libBase(e.Name)) {
			continue
		}
		file, err := securejoin.SecureJoin(root, e.Path)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() || !strings.HasSuffix(filepath.Base(file), ".so."+version) {
			continue
		}
		real := filepath.Base(file)
		i, ok := byFile[real]
		if !ok {
			i = len(df.Libs)
			byFile[real] = i
			df.Libs = append(df.Libs, Lib{File: file, Names: []string{real}, Flags: e.Flags})
		}
		if !slices.Contains(df.Libs[i].Names, e.Name) {
			df.Libs[i].Names = append(df.Libs[i].Names, e.Name)
		}
	}
	slices.SortFunc(df.Libs, func(a, b Lib) int { return strings.Compare(a.Names[0], b.Names[0]) })
	for _, name := range driverBins {
		for _, dir := range binDirs {
			p, err := securejoin.SecureJoin(root, filepath.Join(dir, name))
			if err != nil {
				continue
			}
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				df.Bins = append(df.Bins, p)
				break
			}
		}
	}
	if len(df.Libs) == 0 {
		return nil, fmt.Errorf("%w: the ldcache lists no driver library *.so.%s (libcuda, libnvidia-ml, ...)", ErrBadRoot, version)
	}
	return df, nil
}

// LDEntries are the cache entries that find the libraries in ContainerLibDir.
func (df *DriverFiles) LDEntries() []LDEntry {
	var es []LDEntry
	for _, l := range df.Libs {
		for _, n := range l.Names {
			es = append(es, LDEntry{Name: n, Path: ContainerLibDir + "/" + n, Flags: l.Flags})
		}
	}
	return es
}

// MergeLDCache is a container's /etc/ld.so.cache: the image's own cache
// with the driver's libraries first-class in it, as the toolkit's
// update-ldcache hook makes it. An image's own copy of a driver library
// (a libcuda.so.1 baked in) is dropped: it would not match the kernel
// module. image is the image's cache (nil: none).
func (df *DriverFiles) MergeLDCache(image []byte) ([]byte, error) {
	ours := df.LDEntries()
	var theirs []LDEntry
	if image != nil {
		es, err := ParseLDCache(image)
		if err != nil {
			return nil, fmt.Errorf("image's /etc/ld.so.cache: %w", err)
		}
		theirs = slices.DeleteFunc(es, func(e LDEntry) bool { return slices.Contains(computeLibs, libBase(e.Name)) })
	}
	return EncodeLDCache(append(ours, theirs...)), nil
}

// libBase is "libcuda" for "libcuda.so.1".
func libBase(name string) string {
	base, _, _ := strings.Cut(name, ".so")
	return base
}

// archOK: the entry is for this architecture (x86-64: 0x0300, aarch64:
// 0x0a00, in glibc's ldconfig.h), so 32-bit copies are skipped.
func archOK(flags int32) bool {
	arch := map[string]int32{"amd64": 0x0300, "arm64": 0x0a00}[runtime.GOARCH]
	return arch == 0 || flags&0xff00 == arch
}
