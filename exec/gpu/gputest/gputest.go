// Package gputest turns the fixture hosts of testdata/gpu into what
// detection reads: a fake root (for Config.Root and `foreman agent
// --gpu-root`) and an nvidia-smi that prints the host's fixtures, fails or
// hangs. For tests only.
package gputest

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Dir is testdata/gpu of this repository.
func Dir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("gputest: cannot find its own source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "gpu")
}

// Root builds host's fake root in a temporary directory and returns it:
// proc/driver/nvidia/gpus/<bus>/information, proc/driver/nvidia/version,
// proc/devices, sys/bus/pci/devices/<bus>/vendor and a dev/nvidiaN file
// per device.
func Root(t testing.TB, host string) string {
	t.Helper()
	src := filepath.Join(Dir(t), host)
	root := t.TempDir()
	write := func(path string, b []byte) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(src, from))
		if err != nil {
			t.Fatal(err)
		}
		write(to, b)
	}
	copyFile("version", "proc/driver/nvidia/version")
	copyFile("devices", "proc/devices")
	infos, err := filepath.Glob(filepath.Join(src, "gpus", "*.information"))
	if err != nil || len(infos) == 0 {
		t.Fatalf("gputest: no %s/gpus/*.information (%v)", src, err)
	}
	for i, f := range infos {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bus := field(b, "Bus Location")
		if bus == "" || strings.ContainsAny(bus, "/\x00") {
			bus = "garbage-" + filepath.Base(f) // still one directory per file
		}
		write(filepath.Join("proc/driver/nvidia/gpus", bus, "information"), b)
		write(filepath.Join("sys/bus/pci/devices", bus, "vendor"), []byte("0x10de\n"))
		minor := field(b, "Device Minor")
		if minor == "" || strings.ContainsAny(minor, "/\x00") {
			minor = "x" + string(rune('0'+i%10))
		}
		write("dev/nvidia"+minor, nil)
	}
	write("dev/nvidiactl", nil)
	return root
}

// SMI writes an nvidia-smi for host into a temporary directory and returns
// its path. mode is "print", "fail" or "hang" (testdata/gpu/fake-nvidia-smi).
func SMI(t testing.TB, mode, host string) string {
	t.Helper()
	dir := Dir(t)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "nvidia-smi")
	script := "#!/bin/sh\nexec " + shellQuote(filepath.Join(abs, "fake-nvidia-smi")) + " " + mode + " " +
		shellQuote(filepath.Join(abs, host)) + " \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func field(b []byte, key string) string {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && string(bytes.TrimSpace(k)) == key {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
