package rig

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The fake GPU host of a node (Cluster.GPUs), laid out as
// exec/gpu/gputest.Devices lays out its two-GPU host: /proc/devices names
// major 7 (the virtual-console memory devices) "nvidia-frontend", so
// /dev/nvidia<m> is the real character device 7:<m>, and the agent (root)
// puts every process job in a device cgroup that allows only the minors the
// attempt holds. The jobs never open them; what matters is that the agent
// runs its real GPU path. gputest itself takes a testing.TB and gives every
// host the same two UUIDs; here each node gets its own UUIDs, so a UUID
// names one device of the whole cluster.
const (
	gpuMajor = 7
	uvmMajor = 511
)

// GPUMemoryMiB is each fake device's memory (an H100 80GB's), which the
// host's fake nvidia-smi reports so the leader can pack VRAM shares.
const GPUMemoryMiB = 81559

// fakeSMI answers detection's --query-gpu with every device's memory, and
// the watchdog's --query-compute-apps with no process; the rest (topo,
// -q) fails, which detection only warns about.
const fakeSMI = `#!/bin/sh
case "$*" in
--query-compute-apps=*) exit 0 ;;
--query-gpu=uuid,utilization*) exit 2 ;;
--query-gpu=*) cat "$(dirname "$0")/query.csv" ;;
*) exit 2 ;;
esac
`

// GPUUUID is the UUID of GPU index i on node (n1, n2, …): the node's number
// and the index in hex, so the records name the node too.
func GPUUUID(node string, i int) string {
	var n int
	_, _ = fmt.Sscanf(node, "n%d", &n)
	return fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", n, i)
}

// makeGPUHost writes a fake root for node with count GPUs under dir:
// proc/devices, the driver version, one information file and PCI vendor
// per device, and /dev/nvidia<i> (minor i), nvidiactl and nvidia-uvm as
// character devices. It needs root (mknod).
func makeGPUHost(dir, node string, count int) error {
	write := func(p, s string) error {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		return os.WriteFile(full, []byte(s), 0o644)
	}
	mknod := func(p string, major, minor int) error {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		_ = os.Remove(full) // a restart finds it made
		if err := unix.Mknod(full, unix.S_IFCHR|0o666, int(unix.Mkdev(uint32(major), uint32(minor)))); err != nil {
			return fmt.Errorf("mknod %s: %w", full, err)
		}
		return os.Chmod(full, 0o666) // mknod's mode is cut by the umask
	}
	if err := write("proc/devices", fmt.Sprintf("Character devices:\n  1 mem\n  %d nvidia-frontend\n %d nvidia-uvm\n\nBlock devices:\n  7 loop\n", gpuMajor, uvmMajor)); err != nil {
		return err
	}
	if err := write("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (jepsen)  Thu Oct 30 05:51:10 UTC 2025\n"); err != nil {
		return err
	}
	var query strings.Builder
	for i := 0; i < count; i++ {
		bus := fmt.Sprintf("0000:%02x:00.0", 0x10+i)
		fmt.Fprintf(&query, "%d, %s, NVIDIA H100 80GB HBM3, 0000%s, %d, 9.0, 580.159.04\n", i, GPUUUID(node, i), bus, GPUMemoryMiB)
		info := fmt.Sprintf("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t %s\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n",
			GPUUUID(node, i), bus, i)
		if err := write("proc/driver/nvidia/gpus/"+bus+"/information", info); err != nil {
			return err
		}
		if err := write("sys/bus/pci/devices/"+bus+"/vendor", "0x10de\n"); err != nil {
			return err
		}
		if err := mknod(fmt.Sprintf("dev/nvidia%d", i), gpuMajor, i); err != nil {
			return err
		}
	}
	if err := write("query.csv", query.String()); err != nil {
		return err
	}
	if err := write("nvidia-smi", fakeSMI); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(dir, "nvidia-smi"), 0o755); err != nil {
		return err
	}
	if err := mknod("dev/nvidiactl", gpuMajor, 255); err != nil {
		return err
	}
	if err := mknod("dev/nvidia-uvm", uvmMajor, 0); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}
