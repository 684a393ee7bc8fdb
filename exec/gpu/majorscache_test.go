package gpu

import (
	"os"
	"path/filepath"
	"testing"
)

// The cache answers from memory while the modules' directories are the
// same ones, and reads /proc/devices again as soon as a module is loaded,
// unloaded or reloaded; a root without sys/module is never cached.
func TestMajorsCache(t *testing.T) {
	root := t.TempDir()
	devices := func(lines string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "proc/devices"), []byte("Character devices:\n  1 mem\n"+lines+"\nBlock devices:\n  8 sd\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var c MajorsCache
	read := func(what string, want Majors) {
		t.Helper()
		got, err := c.Read(root)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.GPU != want.GPU || got.UVM != want.UVM || len(got.Other) != len(want.Other) {
			t.Fatalf("%s: majors %+v, want %+v", what, got, want)
		}
	}
	module := filepath.Join(root, "sys/module")

	devices("")
	read("no sys/module", Majors{})
	devices("195 nvidia")
	read("no sys/module: read every time", Majors{GPU: 195})

	if err := os.MkdirAll(module, 0o755); err != nil {
		t.Fatal(err)
	}
	devices("")
	read("no driver", Majors{})
	devices("195 nvidia")
	read("the same modules: cached", Majors{})

	if err := os.Mkdir(filepath.Join(module, "nvidia"), 0o755); err != nil {
		t.Fatal(err)
	}
	read("nvidia loaded", Majors{GPU: 195})
	devices("195 nvidia\n510 nvidia-uvm")
	read("the same modules again: cached", Majors{GPU: 195})
	if err := os.Mkdir(filepath.Join(module, "nvidia_uvm"), 0o755); err != nil {
		t.Fatal(err)
	}
	read("nvidia_uvm loaded", Majors{GPU: 195, UVM: 510})

	// A reload: a new directory (the old one is kept aside, so the new one
	// cannot take its inode).
	if err := os.Rename(filepath.Join(module, "nvidia_uvm"), filepath.Join(root, "old_uvm")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(module, "nvidia_uvm"), 0o755); err != nil {
		t.Fatal(err)
	}
	devices("195 nvidia\n511 nvidia-uvm\n240 nvidia-caps")
	read("nvidia_uvm reloaded", Majors{GPU: 195, UVM: 511, Other: []int64{240}})

	if err := os.Remove(filepath.Join(module, "nvidia_uvm")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(module, "nvidia")); err != nil {
		t.Fatal(err)
	}
	devices("")
	read("unloaded", Majors{})

	other := t.TempDir() // with sys/module: cached too, but per root
	if err := os.MkdirAll(filepath.Join(other, "sys/module"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(other, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "proc/devices"), []byte("Character devices:\n195 nvidia\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Read(other); err != nil || got.GPU != 195 {
		t.Fatalf("another root: %+v, %v; want its own majors", got, err)
	}
}
