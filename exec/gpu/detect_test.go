package gpu_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/exec/gpu/gputest"
	"github.com/foreman-sched/foreman/fsm"
)

func detect(t *testing.T, root, smi string, timeout time.Duration) gpu.Inventory {
	t.Helper()
	if smi == "" {
		smi = filepath.Join(t.TempDir(), "no-nvidia-smi") // never the host's
	}
	return gpu.Detect(context.Background(), gpu.Config{Root: root, NvidiaSMI: smi, Timeout: timeout})
}

func TestDetectH200(t *testing.T) {
	inv := detect(t, gputest.Root(t, "h200"), gputest.SMI(t, "print", "h200"), time.Minute)
	want := []fsm.GPU{{
		UUID: "GPU-d87123f6-fea5-26be-6826-1c34038af791", Index: 0, Minor: 0, BusID: "0000:00:06.0",
		Model: "NVIDIA H200", MemoryMiB: 143771, Compute: "9.0",
	}}
	if !reflect.DeepEqual(inv.GPUs, want) {
		t.Fatalf("GPUs:\n got %+v\nwant %+v", inv.GPUs, want)
	}
	if inv.Driver != "580.159.04" || inv.CUDA != "13.0" || inv.SMI == "" {
		t.Fatalf("driver %q cuda %q smi %q", inv.Driver, inv.CUDA, inv.SMI)
	}
	if len(inv.Warnings) != 0 {
		t.Fatalf("warnings: %q", inv.Warnings)
	}
}

func TestDetectProcOnly(t *testing.T) {
	// No nvidia-smi: the /proc floor still gives UUID, minor, bus and model.
	inv := detect(t, gputest.Root(t, "nvlink8"), "", time.Minute)
	if len(inv.GPUs) != 8 || inv.Healthy() != 8 {
		t.Fatalf("want 8 healthy GPUs, got %+v", inv.GPUs)
	}
	g := inv.GPUs[2]
	if g.Index != 2 || g.Minor != 5 || g.BusID != "0000:3a:00.0" || g.Model != "NVIDIA H100 80GB HBM3" || g.MemoryMiB != 0 || g.Links != nil {
		t.Fatalf("GPU 2 from /proc: %+v", g)
	}
	if inv.Driver != "580.159.04" || inv.SMI != "" {
		t.Fatalf("driver %q smi %q", inv.Driver, inv.SMI)
	}
}

func TestDetectNVLink8(t *testing.T) {
	inv := detect(t, gputest.Root(t, "nvlink8"), gputest.SMI(t, "print", "nvlink8"), time.Minute)
	if len(inv.GPUs) != 8 || len(inv.Warnings) != 0 {
		t.Fatalf("GPUs %d, warnings %q", len(inv.GPUs), inv.Warnings)
	}
	for i, g := range inv.GPUs {
		if g.Index != i || g.MemoryMiB != 81559 || g.Compute != "9.0" || len(g.Links) != 8 || g.Links[i] != "X" {
			t.Fatalf("GPU %d: %+v", i, g)
		}
	}
	if got := inv.GPUs[0].Links; !reflect.DeepEqual(got, []string{"X", "NV18", "NODE", "NODE", "NV18", "NV18", "SYS", "SYS"}) {
		t.Fatalf("GPU 0 links %q", got)
	}
	if inv.GPUs[5].Minor != 2 {
		t.Fatalf("GPU 5 is /dev/nvidia2 in the fixture, got minor %d", inv.GPUs[5].Minor)
	}
}

func TestDetectNoDriver(t *testing.T) {
	inv := detect(t, t.TempDir(), "", time.Minute)
	if len(inv.GPUs) != 0 || len(inv.Warnings) != 0 || inv.Driver != "" {
		t.Fatalf("an empty root: %+v", inv)
	}
}

func TestDetectSMIFails(t *testing.T) {
	inv := detect(t, gputest.Root(t, "h200"), gputest.SMI(t, "fail", "h200"), time.Minute)
	if len(inv.GPUs) != 1 || inv.GPUs[0].MemoryMiB != 0 || inv.SMI != "" {
		t.Fatalf("a failing nvidia-smi must leave the /proc floor: %+v", inv)
	}
	if len(inv.Warnings) != 1 || !strings.Contains(inv.Warnings[0], "couldn't communicate with the NVIDIA driver") {
		t.Fatalf("warnings %q", inv.Warnings)
	}
}

func TestDetectSMIHangs(t *testing.T) {
	inv := detect(t, gputest.Root(t, "h200"), gputest.SMI(t, "hang", "h200"), 200*time.Millisecond)
	if len(inv.GPUs) != 1 || inv.GPUs[0].UUID == "" {
		t.Fatalf("a hung nvidia-smi must leave the /proc floor: %+v", inv)
	}
	if len(inv.Warnings) != 1 || !strings.Contains(inv.Warnings[0], gpu.ErrSMITimeout.Error()) {
		t.Fatalf("warnings %q", inv.Warnings)
	}
}

func TestDetectGarbage(t *testing.T) {
	inv := detect(t, gputest.Root(t, "garbage"), gputest.SMI(t, "print", "garbage"), time.Minute)
	if len(inv.GPUs) != 0 {
		t.Fatalf("garbage gave GPUs: %+v", inv.GPUs)
	}
	if len(inv.Warnings) < 2 {
		t.Fatalf("want a warning per broken file, got %q", inv.Warnings)
	}
	for _, w := range inv.Warnings {
		if !strings.Contains(w, "information") && !strings.Contains(w, "/proc/devices") {
			t.Errorf("warning names no file: %q", w)
		}
	}
}

func TestDetectUnhealthy(t *testing.T) {
	root := gputest.Root(t, "nvlink8")
	// Excluded by the driver: known, never placed on.
	p := filepath.Join(root, "proc/driver/nvidia/gpus/0000:9a:00.0/information")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "GPU Excluded:\t No", "GPU Excluded:\t Yes", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := detect(t, root, gputest.SMI(t, "print", "nvlink8"), time.Minute)
	if inv.Healthy() != 7 || inv.GPUs[4].Healthy() || !strings.Contains(inv.GPUs[4].Health, "excluded") {
		t.Fatalf("GPU 4 excluded: %+v", inv.GPUs[4])
	}
}

func TestNotNVIDIAVendor(t *testing.T) {
	root := gputest.Root(t, "h200")
	if err := os.WriteFile(filepath.Join(root, "sys/bus/pci/devices/0000:00:06.0/vendor"), []byte("0x1002\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := detect(t, root, "", time.Minute)
	if len(inv.GPUs) != 0 || len(inv.Warnings) != 1 {
		t.Fatalf("a non-NVIDIA PCI device: %+v", inv)
	}
}

func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:2A:00.0":  "0000:2a:00.0",
		"0000:00:06.0":      "0000:00:06.0",
		" 00000001:DB:1F.7": "0001:db:1f.7",
	} {
		if got, err := gpu.NormalizeBusID(in); err != nil || got != want {
			t.Errorf("NormalizeBusID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0000:00:06", "1:0000:00:06.0", "00010000:00:06.0", "0000:0g:06.0", "0000:00:06.10"} {
		if got, err := gpu.NormalizeBusID(in); err == nil {
			t.Errorf("NormalizeBusID(%q) = %q, want an error", in, got)
		}
	}
}

func TestParseQuery(t *testing.T) {
	rows, bad := gpu.ParseQuery([]byte("0, GPU-d87123f6-fea5-26be-6826-1c34038af791, NVIDIA H200, 00000000:00:06.0, 143771, [N/A], 580.159.04\n" +
		"1, GPU-x, NVIDIA H200, 00000000:00:07.0, 1, 9.0, 580\n"))
	if len(rows) != 1 || rows[0].Compute != "" || rows[0].MemoryMiB != 143771 || rows[0].BusID != "0000:00:06.0" {
		t.Fatalf("rows %+v", rows)
	}
	if len(bad) != 1 || !strings.Contains(bad[0], "line 2: uuid") {
		t.Fatalf("bad %q", bad)
	}
}

func TestParseTopoErrors(t *testing.T) {
	for name, in := range map[string]string{
		"no header":  "hello\n",
		"short row":  "\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU1\tNV1\n",
		"bad link":   "\tGPU0\tGPU1\nGPU0\t X \tWAT\nGPU1\tWAT\t X \n",
		"self":       "\tGPU0\tGPU1\nGPU0\tNV1\tNV1\nGPU1\tNV1\t X \n",
		"row twice":  "\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU0\t X \tNV1\n",
		"row absent": "\tGPU0\tGPU1\nGPU0\t X \tNV1\n",
		"row beyond": "\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU1\tNV1\t X \nGPU2\tNV1\tNV1\t X\n",
	} {
		if _, err := gpu.ParseTopo([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
