package systest

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu/gputest"
)

// TestSystemGPUIsolation runs a real agent on a fake GPU host whose two
// "GPUs" are real character devices (exec/gpu/gputest.Devices, under
// --gpu-root): a `run --gpus 1` job in each driver can open exactly the
// device the leader assigned it, as the kernel's device cgroup decides,
// with CUDA_VISIBLE_DEVICES=0 and its UUID; a job without GPUs can open
// neither and gets CUDA_VISIBLE_DEVICES empty.
func TestSystemGPUIsolation(t *testing.T) {
	host := gputest.Devices(t)
	kmsg := host.Path("dev/kmsg") // the kernel log the agent follows for XIDs
	if err := syscall.Mkfifo(kmsg, 0o600); err != nil {
		t.Fatal(err)
	}
	c := newSysCluster(t, 1, "--gpu-root", host.Dir)
	a := c.agents[0]
	cli := func(args ...string) cliResult {
		t.Helper()
		return runForeman(t, c.bin, a.url(""), args...)
	}
	eventually(t, systemTimeout, "n1 lists its 2 GPUs", func() error {
		r := cli("node", "show", "n1", "--json")
		var nd gpuNodeView
		if err := json.Unmarshal([]byte(r.stdout), &nd); err != nil {
			return fmt.Errorf("node show: %v %s", err, r.stderr)
		}
		if len(nd.GPUs) != 2 {
			return fmt.Errorf("gpus %+v", nd.GPUs)
		}
		return nil
	})
	devs := []string{host.Path("dev/nvidia0"), host.Path("dev/nvidia1")}
	// Each line: "<path> ok" or "<path> <error>".
	probe := gputest.OpenScript(devs...) + `echo "CVD=[$CUDA_VISIBLE_DEVICES] UUIDS=$FOREMAN_GPU_UUIDS"`
	byUUID := map[string]string{} // UUID -> its stand-in
	for _, g := range host.GPUs {
		byUUID[g.UUID] = host.Path(fmt.Sprintf("dev/nvidia%d", g.Minor))
	}

	t.Run("process", func(t *testing.T) {
		r := cli("run", "--gpus", "1", "--driver", "process", "--", "sh", "-c", probe)
		if r.code != 0 {
			t.Fatalf("run --gpus 1: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		uuid := strings.TrimPrefix(lineWith(r.stdout, "UUIDS="), "CVD=[0] UUIDS=")
		mine, ok := byUUID[uuid]
		if !ok {
			t.Fatalf("the job's FOREMAN_GPU_UUIDS/CUDA_VISIBLE_DEVICES: %q", lineWith(r.stdout, "UUIDS="))
		}
		for _, d := range devs {
			want := d + " Operation not permitted"
			if d == mine {
				want = d + " ok"
			}
			if !slices.Contains(strings.Split(r.stdout, "\n"), want) {
				t.Errorf("want %q; the job printed:\n%s", want, r.stdout)
			}
		}
		r = cli("run", "--driver", "process", "--", "sh", "-c", probe)
		for _, d := range devs {
			if !strings.Contains(r.stdout, d+" Operation not permitted") {
				t.Errorf("a job without GPUs opened %s:\n%s", d, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "CVD=[] UUIDS=\n") {
			t.Errorf("a job without GPUs: %q", lineWith(r.stdout, "CVD="))
		}
	})

	t.Run("xid", func(t *testing.T) {
		testXIDs(t, cli, kmsg, gpuBus{host.GPUs[0].UUID, host.GPUs[0].BusID}, gpuBus{host.GPUs[1].UUID, host.GPUs[1].BusID})
	})

	t.Run("container", func(t *testing.T) {
		var nodes struct {
			Nodes []struct {
				Drivers []string `json:"drivers"`
			} `json:"nodes"`
		}
		if err := getJSON(a.url("/v1/nodes"), &nodes); err != nil || len(nodes.Nodes) != 1 {
			t.Fatalf("nodes: %v %+v", err, nodes)
		}
		requireCapability(t, slices.Contains(nodes.Nodes[0].Drivers, "container"), "the container driver (root + cgroups)")
		r := cli("run", "--gpus", "1", "--driver", "container", "--", "sh", "-c",
			"ls /dev | grep nvidia; "+gputest.OpenScript("/dev/nvidia0", "/dev/nvidia1")+`echo "CVD=[$CUDA_VISIBLE_DEVICES] UUIDS=$FOREMAN_GPU_UUIDS"`)
		if r.code != 0 {
			t.Fatalf("run --gpus 1 --driver container: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		uuid := strings.TrimPrefix(lineWith(r.stdout, "UUIDS="), "CVD=[0] UUIDS=")
		node := strings.TrimPrefix(byUUID[uuid], host.Dir)
		if node == "" {
			t.Fatalf("the job's GPU variables: %q", lineWith(r.stdout, "UUIDS="))
		}
		other := "/dev/nvidia0"
		if node == other {
			other = "/dev/nvidia1"
		}
		// Its /dev has its own node and the driver's, not the other GPU's.
		want := "nvidia-uvm\nnvidia-uvm-tools\n" + strings.TrimPrefix(node, "/dev/") + "\nnvidiactl\n"
		lines := strings.Split(r.stdout, "\n")
		if !strings.HasPrefix(r.stdout, want) || !slices.Contains(lines, node+" ok") || !slices.Contains(lines, other+" No such file") {
			t.Errorf("the container printed\n%s\nwant its /dev to list\n%sand %s to open", r.stdout, want, node)
		}
	})
}

func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// TestSystemGPUIsolation's XID part: a critical XID in the kernel log marks
// its device unhealthy in the node record at once (the leader places no
// more on it, the advertised count drops); an application's XID does not.
func testXIDs(t *testing.T, cli func(args ...string) cliResult, kmsg string, bad, good gpuBus) {
	t.Helper()
	w, err := os.OpenFile(kmsg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fmt.Fprintf(w, "4,10,10,-;NVRM: Xid (PCI:%s): 13, pid=1, name=a.out, Graphics Exception\n", good.xidBus())
	fmt.Fprintf(w, "4,11,11,-;NVRM: Xid (PCI:%s): 79, pid=1, name=python3, GPU has fallen off the bus.\n", bad.xidBus())
	eventually(t, systemTimeout, "the XID 79 device unhealthy in the node record", func() error {
		var nd gpuNodeView
		r := cli("node", "show", "n1", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &nd); err != nil {
			return fmt.Errorf("node show: %v %s", err, r.stderr)
		}
		for _, g := range nd.GPUs {
			want := ""
			if g.UUID == bad.uuid {
				want = "xid 79: GPU has fallen off the bus (pid 1 python3)"
			}
			if g.Health != want {
				return fmt.Errorf("%s health %q, want %q", g.UUID, g.Health, want)
			}
		}
		if nd.Capacity.Named["gpu"] != 1 {
			return fmt.Errorf("advertised gpu %d, want 1", nd.Capacity.Named["gpu"])
		}
		return nil
	})
}

type gpuBus struct{ uuid, bus string }

// xidBus is the address as the driver prints it in an XID: no function.
func (g gpuBus) xidBus() string { return strings.TrimSuffix(g.bus, ".0") }
