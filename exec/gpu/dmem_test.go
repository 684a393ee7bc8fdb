package gpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// A fake root stands in for a kernel with the dmem controller: this
// machine's kernel has none (and cgroup v1), so the files are plain files
// and the test checks what is decided and where it is written.
func dmemRoot(t *testing.T, capacity string) string {
	t.Helper()
	root := t.TempDir()
	cg := filepath.Join(root, CgroupRoot)
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	if capacity != "" {
		if err := os.WriteFile(filepath.Join(cg, "dmem.capacity"), []byte(capacity), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cg, "cgroup.subtree_control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestDmemDecision(t *testing.T) {
	gpus := []fsm.GPU{{UUID: "GPU-a", BusID: "0000:19:00.0", MemoryMiB: 143771}, {UUID: "GPU-b", BusID: "0000:3a:00.0", MemoryMiB: 143771}}
	both := "nvidia/0000:19:00.0/vidmem 150754820096\nnvidia/0000:3a:00.0/vidmem 150754820096\ndrm/0000:00:02.0/vram0 0\n"
	one := "nvidia/0000:19:00.0/vidmem 150754820096\n"
	for _, tc := range []struct {
		name, capacity string
		kill           bool
		mode           string
	}{
		{"every device", both, false, fsm.GPUMemoryDmem},
		{"one device missing", one, false, fsm.GPUMemoryWatchReport},
		{"no dmem", "", false, fsm.GPUMemoryWatchReport},
		{"no dmem, kill", "", true, fsm.GPUMemoryWatchKill},
		{"garbage", "nvidia/0000:19:00.0/vidmem lots\n\n", true, fsm.GPUMemoryWatchKill},
	} {
		regions, err := DmemRegions(dmemRoot(t, tc.capacity))
		if err != nil {
			t.Fatal(err)
		}
		if got := MemoryMode(gpus, regions, tc.kill); got != tc.mode {
			t.Errorf("%s: mode %q, want %q", tc.name, got, tc.mode)
		}
	}
	if got := MemoryMode(nil, nil, true); got != "" {
		t.Errorf("no GPUs: mode %q", got)
	}
	regions, _ := DmemRegions(dmemRoot(t, one))
	line, ok := DmemMax(&fsm.GPUShare{GPU: gpus[0], MemoryMiB: 20480}, regions)
	if !ok || line != "nvidia/0000:19:00.0/vidmem 21474836480" {
		t.Fatalf("DmemMax = %q, %v", line, ok)
	}
	if _, ok := DmemMax(&fsm.GPUShare{GPU: gpus[1], MemoryMiB: 20480}, regions); ok {
		t.Fatal("DmemMax for a device without a region")
	}
}

func TestSetDmemMax(t *testing.T) {
	root := dmemRoot(t, "nvidia/0000:19:00.0/vidmem 150754820096\n")
	const cg = "/foreman/n1/process/job-1"
	if err := SetDmemMax(root, cg, "nvidia/0000:19:00.0/vidmem 21474836480"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, CgroupRoot, cg, "dmem.max"))
	if err != nil || string(b) != "nvidia/0000:19:00.0/vidmem 21474836480" {
		t.Fatalf("dmem.max = %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, CgroupRoot, "cgroup.subtree_control")); string(b) != "+dmem" {
		t.Fatalf("root subtree_control = %q, want +dmem", b)
	}
}

func TestPIDInCgroup(t *testing.T) {
	root := t.TempDir()
	write := func(pid, body string) {
		p := filepath.Join(root, "proc", pid, "cgroup")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10", "12:devices:/foreman/n1/process/JOB-1\n5:cpu,cpuacct:/foreman/n1/process\n0::/\n")
	write("11", "0::/foreman/n1/JOB-1/sub\n")
	write("12", "12:devices:/foreman/n1/process/JOB-12\n")
	for _, c := range []struct {
		pid  int
		want bool
	}{{10, true}, {11, true}, {12, false}, {13, false}} {
		if got := PIDInCgroup(root, c.pid, "JOB-1"); got != c.want {
			t.Errorf("pid %d in JOB-1: %v, want %v", c.pid, got, c.want)
		}
	}
}
