package gpu_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/fsm"
)

func TestParseXID(t *testing.T) {
	tests := []struct {
		line string
		want gpu.XID
		ok   bool
	}{
		{"4,1841,5436718402,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
			gpu.XID{Bus: "0000:3b:00.0", Code: 79, PID: 1234, Proc: "python3", Text: "GPU has fallen off the bus."}, true},
		{"[ 1234.5678] NVRM: Xid (PCI:0000:00:06): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 0, TPC 0): Out Of Range Address",
			gpu.XID{Bus: "0000:00:06.0", Code: 13, Proc: "<unknown>", Text: "Graphics SM Warp Exception on (GPC 0, TPC 0): Out Of Range Address"}, true},
		{"NVRM: Xid (PCI:0000:DB:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.",
			gpu.XID{Bus: "0000:db:00.0", Code: 48, Text: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0."}, true},
		{"6,100,200,-;NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04", gpu.XID{}, false},
		{"NVRM: Xid (PCI:zzzz): 79, x", gpu.XID{}, false},
		{"NVRM: Xid (PCI:0000:3b:00): notanumber, x", gpu.XID{}, false},
		{"NVRM: Xid (PCI:0000:3b:00", gpu.XID{}, false},
	}
	for i, tc := range tests {
		got, ok := gpu.ParseXID(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%d: got %+v %v, want %+v %v", i, got, ok, tc.want, tc.ok)
		}
	}
	if x, _ := gpu.ParseXID(tests[1].line); x.Critical() {
		t.Error("xid 13 (an application's fault) marks the device unhealthy")
	}
	if x, _ := gpu.ParseXID(tests[0].line); !x.Critical() {
		t.Error("xid 79 leaves the device healthy")
	}
}

func FuzzParseXID(f *testing.F) {
	f.Add("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.")
	f.Add("NVRM: Xid (PCI:0000:3b:00.1): 13, pid=, name=, ,,,")
	f.Fuzz(func(t *testing.T, line string) {
		x, ok := gpu.ParseXID(line)
		if ok && (x.Code <= 0 || x.Bus == "") {
			t.Fatalf("accepted %q as %+v", line, x)
		}
	})
}

// TestXIDWatchAndHealth: XIDs read from a kernel log mark their device
// unhealthy with a reason naming the job of the faulting process; an
// application's XID does not; the device recovers after enough quiet
// detections.
func TestXIDWatchAndHealth(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc/4242"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/4242/environ"), []byte("PATH=/bin\x00FOREMAN_JOB_ID=01JOB\x00"), 0o644)
	log := strings.Join([]string{
		"6,1,1,-;NVRM: loading NVIDIA UNIX Open Kernel Module",
		"4,2,2,-;NVRM: Xid (PCI:0000:00:07): 13, pid=99, name=a.out, Graphics Exception",
		"4,3,3,-;NVRM: Xid (PCI:0000:00:06): 79, pid=4242, name=python3, GPU has fallen off the bus.",
	}, "\n") + "\n"
	h := gpu.NewXIDHealth(2)
	var seen []string
	err := gpu.WatchXIDs(strings.NewReader(log), func(x gpu.XID) {
		reason := x.Reason(gpu.JobOfPID(root, x.PID))
		seen = append(seen, strconv.Itoa(x.Code)+" "+reason)
		if x.Critical() {
			h.Record(x, reason)
		}
	})
	if err != nil || len(seen) != 2 {
		t.Fatalf("seen %q, err %v", seen, err)
	}
	if want := "79 xid 79: GPU has fallen off the bus (pid 4242, job 01JOB)"; seen[1] != want {
		t.Errorf("reason %q, want %q", seen[1], want)
	}
	detect := func() []fsm.GPU {
		g := []fsm.GPU{{UUID: "a", BusID: "0000:00:06.0"}, {UUID: "b", BusID: "0000:00:07.0"}}
		h.Apply(g)
		return g
	}
	for i := range 2 {
		if g := detect(); g[0].Health == "" || g[1].Health != "" {
			t.Fatalf("detection %d: %+v: want a unhealthy (xid 79), b healthy (xid 13 is the job's)", i, g)
		}
	}
	if g := detect(); g[0].Health != "" {
		t.Errorf("after 2 quiet detections a is still %q", g[0].Health)
	}
}

// TestXIDHealthForget: an operator's reset drops a device's mark at once,
// whatever the quiet count; other devices keep theirs.
func TestXIDHealthForget(t *testing.T) {
	h := gpu.NewXIDHealth(10)
	for _, bus := range []string{"0000:00:06.0", "0000:00:07.0"} {
		h.Record(gpu.XID{Bus: bus, Code: 79}, "xid 79")
	}
	if n := h.Forget([]string{"00000000:00:06.0", "0000:00:09.0"}); n != 1 {
		t.Fatalf("forgot %d marks, want 1 (nvidia-smi's form of 06, and none for 09)", n)
	}
	g := []fsm.GPU{{UUID: "a", BusID: "0000:00:06.0"}, {UUID: "b", BusID: "0000:00:07.0"}}
	h.Apply(g)
	if g[0].Health != "" || g[1].Health != "xid 79" {
		t.Fatalf("after the reset: %+v, want a healthy, b still xid 79", g)
	}
}
