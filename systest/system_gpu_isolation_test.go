package systest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

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

// TestSystemGPUMetrics: a real agent on the fake GPU host, with an
// nvidia-smi that answers for its two devices, serves each device's usage
// on /v1/metrics and the device memory of a running --gpus 1 job (the
// compute process nvidia-smi lists is the job's own shell), all passing
// promlint.
func TestSystemGPUMetrics(t *testing.T) {
	host := gputest.Devices(t)
	g0, g1 := host.GPUs[0], host.GPUs[1]
	smi := filepath.Join(host.Dir, "nvidia-smi")
	writeExec(t, smi, `#!/bin/sh
case "$*" in
--query-gpu=uuid,utilization*) printf '%s, 50, 1024, 40, 100.5, 0\n%s, 0, 0, 35, 60, 0\n' `+g0.UUID+` `+g1.UUID+` ;;
--query-compute-apps=*) cat `+host.Dir+`/apps.csv 2> /dev/null ;;
"pmon -c 1 -s u") cat `+host.Dir+`/pmon.txt 2> /dev/null ;;
--query-gpu=*) printf '0, %s, NVIDIA H200, 00000000:00:06.0, 143771, 9.0, 580.159.04\n1, %s, NVIDIA H200, 00000000:00:07.0, 143771, 9.0, 580.159.04\n' `+g0.UUID+` `+g1.UUID+` ;;
*) exit 2 ;;
esac
`)
	c := newSysCluster(t, 1, "--gpu-root", host.Dir, "--nvidia-smi", smi)
	a := c.agents[0]
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	r := runForeman(t, c.bin, a.url(""), "submit", "--gpus", "1", "--driver", "process", "--", "sh", "-c",
		`echo "$$ $FOREMAN_GPU_UUIDS" > `+dir+`/pid; while [ ! -e `+dir+`/release ]; do sleep 0.2; done`)
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	job := strings.TrimSpace(r.stdout)
	var pid, uuid string
	eventually(t, systemTimeout, "the job running", func() error {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if _, err2 := fmt.Sscan(string(b), &pid, &uuid); err != nil || err2 != nil {
			return fmt.Errorf("no pid yet: %v", err)
		}
		return nil
	})
	// nvidia-smi lists the job's shell with 2 GiB; the agent reads its
	// environment under the GPU root.
	os.MkdirAll(host.Path("proc"), 0o755)
	if err := os.Symlink("/proc/"+pid, host.Path("proc/"+pid)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host.Path("apps.csv"), []byte(pid+", "+uuid+", 2048\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	index := "0"
	if uuid == g1.UUID {
		index = "1"
	}
	pmon := "# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command\n" +
		"# Idx           #    C/G      %      %      %      %      %      %    name\n" +
		"    " + index + "  " + pid + "     C     45     12      -      -      -      -    sh\n"
	if err := os.WriteFile(host.Path("pmon.txt"), []byte(pmon), 0o644); err != nil {
		t.Fatal(err)
	}
	wantJob := `foreman_job_gpu_memory_bytes{job="` + job + `",node="n1",uuid="` + uuid + `"} 2.147483648e+09`
	wantSM := `foreman_job_gpu_sm_ratio{job="` + job + `",node="n1",uuid="` + uuid + `"} 0.45`
	var body string
	eventually(t, systemTimeout, "the job's GPU memory and SM use on /v1/metrics", func() error {
		var err error
		if body, err = httpGet(a.url("/v1/metrics")); err != nil {
			return err
		}
		for _, w := range []string{wantJob, wantSM} {
			if !strings.Contains(body, w) {
				return fmt.Errorf("no %s", w)
			}
		}
		return nil
	})
	// job status shows the same, measured by the attempt's node.
	var st struct {
		GPUUsage []struct {
			Node    string `json:"node"`
			Devices []struct {
				UUID        string   `json:"uuid"`
				MemoryBytes *int64   `json:"memory_bytes"`
				SMRatio     *float64 `json:"sm_ratio"`
			} `json:"devices"`
		} `json:"gpu_usage"`
	}
	r = runForeman(t, c.bin, a.url(""), "job", "status", job, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.GPUUsage) != 1 || len(st.GPUUsage[0].Devices) != 1 {
		t.Fatalf("job status --json: %v %s %s", err, r.stdout, r.stderr)
	}
	if d := st.GPUUsage[0].Devices[0]; d.UUID != uuid || d.MemoryBytes == nil || *d.MemoryBytes != 2<<30 || d.SMRatio == nil || *d.SMRatio != 0.45 {
		t.Fatalf("job status gpu_usage %+v", st.GPUUsage)
	}
	r = runForeman(t, c.bin, a.url(""), "job", "status", job)
	if row := lineWith(r.stdout, uuid+"  "); !strings.Contains(r.stdout, "GPU USE") || !strings.Contains(row, "2GiB") || !strings.Contains(row, "45%") {
		t.Fatalf("job status: no GPU USE row with 2GiB and 45%%:\n%s", r.stdout)
	}
	for _, want := range []string{
		`foreman_gpu_utilization_ratio{node="n1",uuid="` + g0.UUID + `"} 0.5`,
		`foreman_gpu_memory_used_bytes{node="n1",uuid="` + g0.UUID + `"} 1.073741824e+09`,
		`foreman_gpu_temperature_celsius{node="n1",uuid="` + g1.UUID + `"} 35`,
		`foreman_gpu_power_watts{node="n1",uuid="` + g0.UUID + `"} 100.5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/v1/metrics lacks %s", want)
		}
	}
	// The UI's Job page shows it too.
	br := newBrowser(t)
	br.open(a.url("/ui/jobs/"+job), "table#attempts")
	br.wait("the job's GPU use row", `(() => { const r = document.querySelector("table#gpu-use tr[data-uuid='`+uuid+`']");
		return r && r.querySelector(".gpu-sm").textContent === "45%" && r.querySelector(".gpu-mem").textContent.startsWith("2") })()`)
	br.shot("job-gpu-use")
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "foreman_gpu") || strings.HasPrefix(p.Metric, "foreman_job_gpu") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
	waitJobState(t, a, job, "succeeded")
}

func writeExec(t *testing.T, p, body string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}
