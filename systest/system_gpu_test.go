package systest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu/gputest"
)

type gpuView struct {
	UUID      string   `json:"uuid"`
	Index     int      `json:"index"`
	Minor     int      `json:"minor"`
	Model     string   `json:"model"`
	MemoryMiB int64    `json:"memory_mib"`
	Health    string   `json:"health"`
	Links     []string `json:"links"`
}

type gpuNodeView struct {
	Name      string `json:"name"`
	GPUDriver string `json:"gpu_driver"`
	CUDA      string `json:"cuda_version"`
	Capacity  struct {
		Named map[string]int64 `json:"named"`
	} `json:"capacity"`
	GPUs []gpuView `json:"gpus"`
}

// TestSystemGPUs runs a real agent on the synthetic 8-GPU host of
// testdata/gpu/nvlink8 (a fake /proc and /dev under --gpu-root, a fake
// nvidia-smi): it detects the devices, shows them in node show/ls, gives
// two --gpus 4 jobs disjoint devices that are each one NVLink island, and
// reads them back from job status --json and from inside the jobs;
// re-detects on SIGHUP; refuses bad requests with the field named.
func TestSystemGPUs(t *testing.T) {
	root := gputest.Root(t, "nvlink8")
	smi := gputest.SMI(t, "print", "nvlink8")
	c := newSysCluster(t, 1, "--gpu-root", root, "--nvidia-smi", smi)
	a := c.agents[0]
	addr := a.url("")
	cli := func(args ...string) cliResult {
		t.Helper()
		return runForeman(t, c.bin, addr, args...)
	}

	// Detection reached the node record: the devices, their links, the count.
	var nd gpuNodeView
	eventually(t, systemTimeout, "n1 lists its 8 GPUs", func() error {
		r := cli("node", "show", "n1", "--json")
		if r.code != 0 {
			return fmt.Errorf("node show: %d %s", r.code, r.stderr)
		}
		nd = gpuNodeView{}
		if err := json.Unmarshal([]byte(r.stdout), &nd); err != nil {
			return err
		}
		if len(nd.GPUs) != 8 || nd.Capacity.Named["gpu"] != 8 {
			return fmt.Errorf("gpus %d, capacity %v", len(nd.GPUs), nd.Capacity.Named)
		}
		return nil
	})
	if g := nd.GPUs[2]; g.Minor != 5 || g.MemoryMiB != 81559 || len(g.Links) != 8 || g.Links[3] != "NV18" || nd.GPUDriver != "580.159.04" || nd.CUDA != "13.0" {
		t.Fatalf("GPU 2 as detected: %+v (driver %q, cuda %q)", g, nd.GPUDriver, nd.CUDA)
	}
	if r := cli("node", "ls"); r.code != 0 || !strings.Contains(r.stdout, "0/8 H100 80GB HBM3") {
		t.Fatalf("node ls: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Two 4-GPU jobs hold their devices until released.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	script := `echo "$FOREMAN_GPU_UUIDS" > ` + dir + `/uuids-$FOREMAN_JOB_ID; while [ ! -e ` + dir + `/release ]; do sleep 0.2; done`
	var ids []string
	for range 2 {
		r := cli("submit", "--gpus", "4", "--", script)
		if r.code != 0 {
			t.Fatalf("submit --gpus 4: %d %s", r.code, r.stderr)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	sets := make([][]int, 2)
	for i, id := range ids {
		eventually(t, systemTimeout, "job "+id+" running with 4 GPUs", func() error {
			var st struct {
				Attempts []struct {
					State string    `json:"state"`
					GPUs  []gpuView `json:"gpus"`
				} `json:"attempts"`
			}
			r := cli("job", "status", id, "--json")
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
				return fmt.Errorf("job status --json: %v: %s %s", err, r.stdout, r.stderr)
			}
			if len(st.Attempts) != 1 || st.Attempts[0].State != "running" || len(st.Attempts[0].GPUs) != 4 {
				return fmt.Errorf("attempts %+v", st.Attempts)
			}
			sets[i] = nil
			var uuids []string
			for _, g := range st.Attempts[0].GPUs {
				sets[i] = append(sets[i], g.Index)
				uuids = append(uuids, g.UUID)
			}
			// What the job itself was given is what the state says.
			b, err := os.ReadFile(filepath.Join(dir, "uuids-"+id))
			if err != nil {
				return err
			}
			seen := strings.Split(strings.TrimSpace(string(b)), ",")
			sort.Strings(seen)
			sort.Strings(uuids)
			if !slices.Equal(seen, uuids) {
				return fmt.Errorf("the job saw FOREMAN_GPU_UUIDS %q, the state says %q", seen, uuids)
			}
			return nil
		})
	}
	slices.Sort(sets[0])
	slices.Sort(sets[1])
	islandA, islandB := []int{0, 1, 4, 5}, []int{2, 3, 6, 7}
	if !(slices.Equal(sets[0], islandA) && slices.Equal(sets[1], islandB)) && !(slices.Equal(sets[0], islandB) && slices.Equal(sets[1], islandA)) {
		t.Fatalf("the two jobs got %v and %v: want the NVLink islands %v and %v", sets[0], sets[1], islandA, islandB)
	}
	if r := cli("job", "status", ids[0]); r.code != 0 || !strings.Contains(r.stdout, "GPUS") {
		t.Fatalf("job status shows no GPUS column: %s %s", r.stdout, r.stderr)
	}

	// The UI: the node's GPU table says who holds each device; the nodes
	// page has a GPU bar.
	br := newBrowser(t)
	br.open(a.url("/ui/nodes/n1"), "table#node-gpus")
	br.wait("8 GPUs, each held", `document.querySelectorAll("table#node-gpus tbody tr").length === 8 &&
		[...document.querySelectorAll("table#node-gpus td.held")].every((td) => td.textContent.includes("/1"))`)
	br.shot("node-gpus")
	br.open(a.url("/ui/nodes"), `tr[data-node="n1"]`)
	br.wait("the GPU bar", `(document.querySelector('tr[data-node="n1"] .bar.gpu') || {}).textContent?.includes("GPUs 8 / 8 H100 80GB HBM3")`)

	// A third waits for devices, with a reason that says so.
	r := cli("submit", "--gpus", "1", "--", "true")
	if r.code != 0 {
		t.Fatalf("submit --gpus 1: %s", r.stderr)
	}
	third := strings.TrimSpace(r.stdout)
	eventually(t, systemTimeout, "the third job waits for GPUs", func() error {
		j, err := getJob(a, third)
		if err != nil {
			return err
		}
		if j.Job.State != "queued" || !strings.Contains(j.Job.Reason, "insufficient gpu") {
			return fmt.Errorf("%s", j)
		}
		return nil
	})

	// Bad requests: the field and the reason, nothing submitted.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--gpus", "-1", "--", "true"}, "--gpus: must be 0 or more"},
		{[]string{"submit", "--gpus", "100", "--", "true"}, "resources.gpus: no node has 100 GPUs (largest: n1 with 8)"},
		{[]string{"submit", "--gpus", "1", "--constraint", "gpu.vram >= 40GiB", "--", "true"}, "unknown GPU attribute gpu.vram"},
	} {
		if r := cli(bad.args...); r.code == 0 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("foreman %s: exit %d, stderr %q; want an error containing %q", strings.Join(bad.args, " "), r.code, r.stderr, bad.want)
		}
	}
	r = cli("submit", "--gpus", "100", "--allow-unplaceable", "--", "true")
	if r.code != 0 {
		t.Fatalf("submit --gpus 100 --allow-unplaceable: %s", r.stderr)
	}
	huge := strings.TrimSpace(r.stdout)
	eventually(t, systemTimeout, "the 100-GPU job's reason", func() error {
		j, err := getJob(a, huge)
		if err != nil {
			return err
		}
		if j.Job.Reason != "no node has 100 GPUs (the most any node has is 8)" {
			return fmt.Errorf("%s", j)
		}
		return nil
	})
	if r := cli("job", "cancel", huge); r.code != 0 {
		t.Fatalf("cancel: %s", r.stderr)
	}

	// Released: the devices are free again and the third job gets one.
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(ids, third) {
		waitJobState(t, a, id, "succeeded")
	}

	// A device the driver now excludes turns unhealthy on SIGHUP.
	info := filepath.Join(root, "proc/driver/nvidia/gpus/0000:db:00.0/information")
	b, err := os.ReadFile(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(info, []byte(strings.Replace(string(b), "GPU Excluded:\t No", "GPU Excluded:\t Yes", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, systemTimeout, "GPU 7 unhealthy and the capacity 7", func() error {
		var nd gpuNodeView
		if err := getJSON(a.url("/v1/nodes/n1"), &nd); err != nil {
			return err
		}
		if len(nd.GPUs) != 8 || !strings.Contains(nd.GPUs[7].Health, "excluded") || nd.Capacity.Named["gpu"] != 7 {
			return fmt.Errorf("gpus %+v capacity %v", nd.GPUs, nd.Capacity.Named)
		}
		return nil
	})
}

// TestSystemGPUClient: a client agent (outside raft) detects the H200 of
// the probe fixture, its hello carries the device to the leader, a GPU job
// constrained to that model lands there with that device, and a change
// after SIGHUP reaches the record through a second hello on the open
// stream.
func TestSystemGPUClient(t *testing.T) {
	c := newSysCluster(t, 1)
	s := c.agents[0]
	root := gputest.Root(t, "h200")
	smi := gputest.SMI(t, "print", "h200")
	os.MkdirAll(filepath.Join(root, "dev"), 0o755)
	kmsg := filepath.Join(root, "dev/kmsg") // the kernel log the agent follows for XIDs
	if err := syscall.Mkfifo(kmsg, 0o600); err != nil {
		t.Fatal(err)
	}
	prefix := s.ip[:strings.LastIndex(s.ip, ".")]
	cl := startAgentAt(t, c.bin, "c1", filepath.Join(c.root, "c1", "data"), prefix+".11", s.base,
		"--role", "client", "--join", net.JoinHostPort(s.ip, fmt.Sprint(s.base)), "--default-driver", "process",
		"--gpu-root", root, "--nvidia-smi", smi)
	const uuid = "GPU-d87123f6-fea5-26be-6826-1c34038af791"
	record := func(what string, ok func(gpuNodeView) bool) {
		t.Helper()
		eventually(t, systemTimeout, what, func() error {
			var nd gpuNodeView
			if err := getJSON(s.url("/v1/nodes/c1?consistent=true"), &nd); err != nil {
				return err
			}
			if !ok(nd) {
				return fmt.Errorf("c1: %+v", nd)
			}
			return nil
		})
	}
	record("c1's hello brought its H200", func(nd gpuNodeView) bool {
		return len(nd.GPUs) == 1 && nd.GPUs[0].UUID == uuid && nd.GPUs[0].MemoryMiB == 143771 && nd.Capacity.Named["gpu"] == 1 && nd.CUDA == "13.0"
	})
	r := runForeman(t, c.bin, s.url(""), "submit", "--gpus", "1", "--constraint", "gpu.model == h200", "--constraint", "gpu.memory >= 140GiB", "--", "true")
	if r.code != 0 {
		t.Fatalf("submit: %s", r.stderr)
	}
	j := waitJobState(t, s, strings.TrimSpace(r.stdout), "succeeded")
	var st struct {
		Attempts []struct {
			Node string    `json:"node"`
			GPUs []gpuView `json:"gpus"`
		} `json:"attempts"`
	}
	if err := getJSON(s.url("/v1/jobs/"+j.Job.ID), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Attempts) != 1 || st.Attempts[0].Node != "c1" || len(st.Attempts[0].GPUs) != 1 || st.Attempts[0].GPUs[0].UUID != uuid {
		t.Fatalf("attempts %+v: want one on c1 holding %s", st.Attempts, uuid)
	}

	// A running job's GPU use is measured by c1 and read through the
	// server, which proxies it (the fixture's processes are none of the
	// job's: 0 bytes, 0% SM, but measured).
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	r = runForeman(t, c.bin, s.url(""), "submit", "--gpus", "1", "--", "sh", "-c", "while [ ! -e "+dir+"/release ]; do sleep 0.2; done")
	if r.code != 0 {
		t.Fatalf("submit: %s", r.stderr)
	}
	long := strings.TrimSpace(r.stdout)
	waitJobState(t, s, long, "running")
	var gu struct {
		GPUUsage []struct {
			Node    string `json:"node"`
			Devices []struct {
				UUID        string   `json:"uuid"`
				MemoryBytes *int64   `json:"memory_bytes"`
				SMRatio     *float64 `json:"sm_ratio"`
			} `json:"devices"`
		} `json:"gpu_usage"`
	}
	r = runForeman(t, c.bin, s.url(""), "job", "status", long, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &gu); err != nil || len(gu.GPUUsage) != 1 || gu.GPUUsage[0].Node != "c1" ||
		len(gu.GPUUsage[0].Devices) != 1 || gu.GPUUsage[0].Devices[0].UUID != uuid || gu.GPUUsage[0].Devices[0].MemoryBytes == nil || gu.GPUUsage[0].Devices[0].SMRatio == nil {
		t.Fatalf("job status --json through the server: %v %s %s", err, r.stdout, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
	waitJobState(t, s, long, "succeeded")

	// A critical XID marks it unhealthy; an operator's reset reaches the
	// client on its work stream and it publishes the device healthy.
	w, err := os.OpenFile(kmsg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close() // the agent's watch ends at EOF
	fmt.Fprintf(w, "4,1,1,-;NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=python3, GPU has fallen off the bus.\n")
	record("c1's GPU unhealthy after XID 79", func(nd gpuNodeView) bool {
		return len(nd.GPUs) == 1 && strings.HasPrefix(nd.GPUs[0].Health, "xid 79") && nd.Capacity.Named["gpu"] == 0
	})
	if r := runForeman(t, c.bin, s.url(""), "node", "gpu-reset", "c1", uuid); r.code != 0 || !strings.Contains(r.stdout, uuid) {
		t.Fatalf("gpu-reset: %d %s %s", r.code, r.stdout, r.stderr)
	}
	record("c1's GPU healthy after the reset", func(nd gpuNodeView) bool {
		return len(nd.GPUs) == 1 && nd.GPUs[0].Health == "" && nd.Capacity.Named["gpu"] == 1
	})

	// The driver now excludes it: after SIGHUP the client says so in a new hello.
	info := filepath.Join(root, "proc/driver/nvidia/gpus/0000:00:06.0/information")
	b, err := os.ReadFile(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(info, []byte(strings.Replace(string(b), "GPU Excluded:\t No", "GPU Excluded:\t Yes", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cl.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	record("c1's GPU unhealthy, its capacity 0", func(nd gpuNodeView) bool {
		return len(nd.GPUs) == 1 && strings.Contains(nd.GPUs[0].Health, "excluded") && nd.Capacity.Named["gpu"] == 0
	})
}
