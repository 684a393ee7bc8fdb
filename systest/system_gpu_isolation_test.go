package systest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
