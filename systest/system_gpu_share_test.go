package systest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu/gputest"
)

// TestSystemGPUShareWatchdog runs a `--gpu-memory 1GiB` job on a real
// agent on a fake GPU host (no dmem controller: the watchdog's case). The
// job sees its one device and its share; then the fake nvidia-smi lists
// the job's own process using 4 GiB of that device. Within the watchdog's
// 10 s grace plus a sample, an attempt.gpu_memory_over event names the
// job, device, use and share; with --gpu-memory-over kill the attempt is
// also stopped with that reason. The node shows its mode.
func TestSystemGPUShareWatchdog(t *testing.T) {
	for _, mode := range []string{"report", "kill"} {
		t.Run(mode, func(t *testing.T) { testGPUShareWatchdog(t, mode) })
	}
}

func testGPUShareWatchdog(t *testing.T, mode string) {
	host := gputest.Devices(t)
	g0 := host.GPUs[0]
	smi := shareSMI(t, host)
	c := newSysCluster(t, 1, "--gpu-root", host.Dir, "--nvidia-smi", smi, "--gpu-memory-over", mode)
	a := c.agents[0]
	cli := func(args ...string) cliResult {
		return runForeman(t, c.bin, a.url(""), args...)
	}
	wantMode := "watchdog-" + mode
	eventually(t, systemTimeout, "the node's GPU memory mode", func() error {
		var n struct {
			Mode string `json:"gpu_memory_mode"`
		}
		r := cli("node", "show", "n1", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &n); err != nil || n.Mode != wantMode {
			return fmt.Errorf("gpu_memory_mode %q (%v): %s", n.Mode, err, r.stderr)
		}
		return nil
	})
	if r := cli("node", "show", "n1"); !strings.Contains(r.stdout, "GPU memory:  shares held by "+wantMode) {
		t.Errorf("node show lacks the mode:\n%s", r.stdout)
	}

	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	r := cli("submit", "--gpu-memory", "1GiB", "--max-attempts", "1", "--driver", "process", "--", "sh", "-c",
		`echo "$$ $FOREMAN_GPU_UUIDS $FOREMAN_GPU_MEMORY_MIB $CUDA_VISIBLE_DEVICES" > `+dir+`/pid; while [ ! -e `+dir+`/release ]; do sleep 0.2; done`)
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	job := strings.TrimSpace(r.stdout)
	var pid, uuid, mib, cuda string
	eventually(t, systemTimeout, "the job running", func() error {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if _, err2 := fmt.Sscan(string(b), &pid, &uuid, &mib, &cuda); err != nil || err2 != nil {
			return fmt.Errorf("no pid yet: %v %v", err, err2)
		}
		return nil
	})
	if uuid != g0.UUID || mib != "1024" || cuda != "0" {
		t.Fatalf("the job saw GPU %s, FOREMAN_GPU_MEMORY_MIB=%s, CUDA_VISIBLE_DEVICES=%s; want %s, 1024, 0", uuid, mib, cuda, g0.UUID)
	}
	var st struct {
		Attempts []struct {
			GPUShare *struct {
				GPU       gpuView `json:"gpu"`
				MemoryMiB int64   `json:"memory_mib"`
			} `json:"gpu_share"`
		} `json:"attempts"`
	}
	r = cli("job", "status", job, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Attempts) != 1 || st.Attempts[0].GPUShare == nil ||
		st.Attempts[0].GPUShare.MemoryMiB != 1024 || st.Attempts[0].GPUShare.GPU.UUID != g0.UUID {
		t.Fatalf("job status --json: %v %s", err, r.stdout)
	}

	// The job's process uses 4 GiB of its 1 GiB share; the agent reads its
	// cgroup under the GPU root.
	os.MkdirAll(host.Path("proc"), 0o755)
	if err := os.Symlink("/proc/"+pid, host.Path("proc/"+pid)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host.Path("apps.csv"), []byte(pid+", "+uuid+", 4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "gpu_memory: 4096 MiB used of a 1024 MiB share on " + g0.UUID
	eventually(t, systemTimeout, "the attempt.gpu_memory_over event", func() error {
		var tl struct {
			Events []struct {
				Type, Reason string
				Attempt      int
			} `json:"events"`
		}
		if err := getJSON(a.url("/v1/jobs/"+job+"/events"), &tl); err != nil {
			return err
		}
		for _, e := range tl.Events {
			if e.Type == "attempt.gpu_memory_over" {
				if e.Reason != want+" ("+mode+")" || e.Attempt != 1 {
					t.Fatalf("event %+v, want reason %q", e, want+" ("+mode+")")
				}
				return nil
			}
		}
		return fmt.Errorf("no gpu_memory_over in %d events", len(tl.Events))
	})
	if mode == "kill" {
		j := waitJobState(t, a, job, "failed")
		if at := j.attempt(1); at == nil || at.State != "killed" || at.Reason != want {
			t.Fatalf("attempt %+v, want killed with reason %q", at, want)
		}
		return
	}
	// Report mode leaves it running.
	if j, err := getJob(a, job); err != nil || j.Job.State != "running" {
		t.Fatalf("report mode: job %+v %v", j, err)
	}
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
	waitJobState(t, a, job, "succeeded")
}

// shareSMI is a fake nvidia-smi for host's two H200s (143,771 MiB each)
// whose compute processes are host.Dir/apps.csv.
func shareSMI(t *testing.T, host *gputest.Host) string {
	t.Helper()
	g0, g1 := host.GPUs[0], host.GPUs[1]
	smi := filepath.Join(host.Dir, "nvidia-smi")
	writeExec(t, smi, `#!/bin/sh
case "$*" in
--query-gpu=uuid,utilization*) printf '%s, 50, 1024, 40, 100.5, 0\n%s, 0, 0, 35, 60, 0\n' `+g0.UUID+` `+g1.UUID+` ;;
--query-compute-apps=*) cat `+host.Dir+`/apps.csv 2> /dev/null ;;
--query-gpu=*) printf '0, %s, NVIDIA H200, 00000000:00:06.0, 143771, 9.0, 580.159.04\n1, %s, NVIDIA H200, 00000000:00:07.0, 143771, 9.0, 580.159.04\n' `+g0.UUID+` `+g1.UUID+` ;;
*) exit 2 ;;
esac
`)
	return smi
}

// TestSystemGPUShares: VRAM shares packed by the leader on real agents. On
// two 140 GiB devices four 60 GiB shares run, two per device (a share
// joins a device that already has shares before breaking into an empty
// one), a fifth waits saying why, and so does a whole-GPU job (no device
// is free of shares). Bad sizes are refused in one line. The UI's Node
// page shows each device's shared MiB.
func TestSystemGPUShares(t *testing.T) {
	host := gputest.Devices(t)
	c := newSysCluster(t, 1, "--gpu-root", host.Dir, "--nvidia-smi", shareSMI(t, host))
	a := c.agents[0]
	cli := func(args ...string) cliResult {
		return runForeman(t, c.bin, a.url(""), args...)
	}
	eventually(t, systemTimeout, "the node's GPUs", func() error {
		var n struct {
			GPUs []gpuView `json:"gpus"`
		}
		r := cli("node", "show", "n1", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &n); err != nil || len(n.GPUs) != 2 {
			return fmt.Errorf("gpus %+v (%v)", n.GPUs, err)
		}
		return nil
	})
	for _, bad := range []struct{ size, want string }{
		{"200GiB", "resources.gpu_memory: no GPU has 200GiB of memory"},
		{"0", "resources.gpu_memory: must be more than 0"},
		{"lots", "--gpu-memory: \"lots\" is not a memory quantity"},
		{"-1GiB", "is negative"},
	} {
		r := cli("submit", "--gpu-memory", bad.size, "--", "true")
		if r.code == 0 || !strings.Contains(r.stderr, bad.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("--gpu-memory %s: exit %d, stderr %q (want one line with %q)", bad.size, r.code, r.stderr, bad.want)
		}
	}
	if r := cli("submit", "--gpus", "2", "--gpu-memory", "1GiB", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "resources.gpu_memory: a share is of one GPU") {
		t.Errorf("--gpus 2 --gpu-memory: exit %d %q", r.code, r.stderr)
	}

	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	var ids []string
	for i := range 5 {
		r := cli("submit", "--gpu-memory", "60GiB", "--driver", "process", "--", "sh", "-c",
			fmt.Sprintf(`echo "$FOREMAN_GPU_UUIDS $FOREMAN_GPU_MEMORY_MIB" > %s/seen-%d; while [ ! -e %s/release ]; do sleep 0.2; done`, dir, i, dir))
		if r.code != 0 {
			t.Fatalf("submit: %d %s", r.code, r.stderr)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
		if i < 4 {
			waitJobState(t, a, ids[i], "running") // one at a time: the packing order is the submit order
		}
	}
	perDevice := map[string]int{}
	for i, id := range ids[:4] {
		var st struct {
			Attempts []struct {
				GPUShare *struct {
					GPU       gpuView `json:"gpu"`
					MemoryMiB int64   `json:"memory_mib"`
				} `json:"gpu_share"`
			} `json:"attempts"`
		}
		r := cli("job", "status", id, "--json")
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Attempts) != 1 || st.Attempts[0].GPUShare == nil {
			t.Fatalf("job status --json: %v %s", err, r.stdout)
		}
		sh := st.Attempts[0].GPUShare
		perDevice[sh.GPU.UUID]++
		eventually(t, systemTimeout, "job "+id+" started", func() error {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("seen-%d", i)))
			if err != nil {
				return err
			}
			if got := strings.TrimSpace(string(b)); got != sh.GPU.UUID+" 61440" {
				t.Fatalf("job %d saw %q, its attempt holds %s (61440 MiB)", i, got, sh.GPU.UUID)
			}
			return nil
		})
		if want := host.GPUs[i/2].UUID; sh.GPU.UUID != want {
			t.Errorf("share %d on %s, want %s (two per device, device 0 first)", i, sh.GPU.UUID, want)
		}
	}
	if len(perDevice) != 2 {
		t.Fatalf("shares per device %v", perDevice)
	}
	whole := cli("submit", "--gpus", "1", "--", "true")
	wholeID := strings.TrimSpace(whole.stdout)
	for id, want := range map[string]string{ids[4]: "1 node: 1 insufficient gpu memory", wholeID: "1 node: 1 insufficient gpu"} {
		eventually(t, systemTimeout, "job "+id+" waiting with its reason", func() error {
			j, err := getJob(a, id)
			if err != nil {
				return err
			}
			if j.Job.State != "queued" || j.Job.Reason != want {
				return fmt.Errorf("%s (%s), want queued (%s)", j.Job.State, j.Job.Reason, want)
			}
			return nil
		})
	}

	br := newBrowser(t)
	br.open(a.url("/ui/nodes/n1"), "table#node-gpus")
	br.wait("each device 120 GiB shared, the mode shown", `[...document.querySelectorAll("table#node-gpus td.shared")].every((td) => td.textContent === "122880/143771 MiB") &&
		document.querySelector("#node-gpu-memory-mode").textContent.includes("watchdog")`)
	br.shot("node-gpu-shares")

	os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
	for _, id := range append(ids, wholeID) {
		waitJobState(t, a, id, "succeeded")
	}
}
