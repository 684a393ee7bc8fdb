package systest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/exec/gpu/gputest"
)

// TestSystemGPUHealth runs a real agent on the fake two-GPU host and
// writes XIDs into the kernel log it follows (a FIFO standing in for
// /dev/kmsg):
//   - a --on-gpu-error requeue job whose device gets a critical XID is
//     stopped (its attempt's reason names the XID) and runs again as
//     attempt 2 on the other device, without using up an attempt;
//   - `node gpu-reset` makes the faulted device healthy and placeable
//     again at once (no 10 quiet detections); unknown names are refused;
//   - a keep job (the default) on a device that faults keeps running;
//   - an attempt.gpu_error event says which policy applied to each.
func TestSystemGPUHealth(t *testing.T) {
	host := gputest.Devices(t)
	kmsg := host.Path("dev/kmsg")
	if err := syscall.Mkfifo(kmsg, 0o600); err != nil {
		t.Fatal(err)
	}
	c := newSysCluster(t, 1, "--gpu-root", host.Dir)
	a := c.agents[0]
	cli := func(args ...string) cliResult {
		t.Helper()
		return runForeman(t, c.bin, a.url(""), args...)
	}
	// Held open for the whole test: the agent's watch ends at EOF.
	w, err := os.OpenFile(kmsg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	busOf := map[string]string{}
	for _, g := range host.GPUs {
		busOf[g.UUID] = strings.TrimSuffix(g.BusID, ".0")
	}
	seq := 100
	xid := func(uuid string) {
		seq++
		fmt.Fprintf(w, "4,%d,%d,-;NVRM: Xid (PCI:%s): 79, pid=1, name=python3, GPU has fallen off the bus.\n", seq, seq, busOf[uuid])
	}
	health := func() (map[string]string, int64, error) {
		var nd gpuNodeView
		r := cli("node", "show", "n1", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &nd); err != nil {
			return nil, 0, fmt.Errorf("node show: %v %s", err, r.stderr)
		}
		out := map[string]string{}
		for _, g := range nd.GPUs {
			out[g.UUID] = g.Health
		}
		return out, nd.Capacity.Named["gpu"], nil
	}
	eventually(t, systemTimeout, "n1 lists its 2 healthy GPUs", func() error {
		h, n, err := health()
		if err != nil || len(h) != 2 || n != 2 {
			return fmt.Errorf("health %v gpu %d %v", h, n, err)
		}
		return nil
	})
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	// Each run appends "<attempt> <uuid>" to its file, then waits.
	job := func(name string, flags ...string) string {
		script := fmt.Sprintf(`echo "$FOREMAN_ATTEMPT $FOREMAN_GPU_UUIDS" >> %[1]s/%[2]s; while [ ! -e %[1]s/release ]; do sleep 0.2; done`, dir, name)
		args := append([]string{"submit", "--gpus", "1", "--driver", "process"}, flags...)
		r := cli(append(args, "--", "sh", "-c", script)...)
		if r.code != 0 {
			t.Fatalf("submit %s: %d %s", name, r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	runs := func(name string) []string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.Fields(string(b))
	}
	gpuEvents := func(id string) (string, error) {
		var tl struct {
			Events []struct {
				Type   string `json:"type"`
				Reason string `json:"reason"`
			} `json:"events"`
		}
		if err := getJSON(a.url("/v1/jobs/"+id+"/events"), &tl); err != nil {
			return "", err
		}
		var out []string
		for _, e := range tl.Events {
			if e.Type == "attempt.gpu_error" {
				out = append(out, e.Reason)
			}
		}
		return strings.Join(out, "\n"), nil
	}

	// A requeue job moves off its faulted device.
	rq := job("requeue", "--on-gpu-error", "requeue")
	var first string
	eventually(t, systemTimeout, "the requeue job running", func() error {
		if r := runs("requeue"); len(r) == 2 {
			first = r[1]
			return nil
		}
		return fmt.Errorf("runs %q", runs("requeue"))
	})
	xidAt := time.Now()
	xid(first)
	var second string
	eventually(t, systemTimeout, "the requeue job's attempt 2 on the other device", func() error {
		r := runs("requeue")
		if len(r) != 4 || r[2] != "2" {
			return fmt.Errorf("runs %q", r)
		}
		second = r[3]
		return nil
	})
	t.Logf("XID written -> attempt 2 running on the other device: %s", time.Since(xidAt).Round(time.Millisecond))
	if second == first || busOf[second] == "" {
		t.Fatalf("attempt 2 ran on %q, attempt 1 on %q: want the other device", second, first)
	}
	j, err := getJob(a, rq)
	if err != nil {
		t.Fatal(err)
	}
	a1 := j.attempt(1)
	if a1 == nil || a1.State != "killed" || !strings.Contains(a1.Reason, "gpu_error: "+first) || !strings.Contains(a1.Reason, "xid 79") || a1.Counted {
		t.Fatalf("attempt 1: %+v, want killed, not counted, its reason naming %s and xid 79", a1, first)
	}
	if ev, err := gpuEvents(rq); err != nil || !strings.Contains(ev, "xid 79") || !strings.Contains(ev, "on_gpu_error requeue") {
		t.Fatalf("requeue job's gpu_error events %q (%v)", ev, err)
	}
	if h, n, _ := health(); h[first] == "" || n != 1 {
		t.Fatalf("after the XID: health %v, gpu %d", h, n)
	}

	// Refused resets change nothing.
	if r := cli("node", "gpu-reset", "nope"); r.code == 0 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("reset of an unknown node: %d %q", r.code, r.stderr)
	}
	if r := cli("node", "gpu-reset", "n1", "GPU-nope"); r.code == 0 || !strings.Contains(r.stderr, `uuids[0]: node n1 has no GPU "GPU-nope"`) {
		t.Errorf("reset of an unknown GPU: %d %q", r.code, r.stderr)
	}
	if h, _, _ := health(); h[first] == "" {
		t.Fatal("a refused reset healed the device")
	}
	// The operator's reset heals it now, not after 10 quiet detections.
	resetAt := time.Now()
	r := cli("node", "gpu-reset", "n1", "--json")
	var reset struct {
		UUIDs []string `json:"uuids"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &reset); r.code != 0 || err != nil || strings.Join(reset.UUIDs, ",") != first {
		t.Fatalf("gpu-reset: %d %s %s", r.code, r.stdout, r.stderr)
	}
	eventually(t, systemTimeout, "the device healthy again", func() error {
		h, n, err := health()
		if err != nil || h[first] != "" || n != 2 {
			return fmt.Errorf("health %v gpu %d %v", h, n, err)
		}
		return nil
	})

	t.Logf("node gpu-reset -> the device healthy in the record: %s", time.Since(resetAt).Round(time.Millisecond))

	// A keep job lands on the healed device (the only free one) and
	// survives its next fault.
	keep := job("keep")
	eventually(t, systemTimeout, "the keep job running on the healed device", func() error {
		if r := runs("keep"); len(r) != 2 || r[1] != first {
			return fmt.Errorf("runs %q, want attempt 1 on %s", r, first)
		}
		return nil
	})
	xid(first)
	eventually(t, systemTimeout, "the keep job's gpu_error event", func() error {
		ev, err := gpuEvents(keep)
		if err != nil || !strings.Contains(ev, "on_gpu_error keep: left running") {
			return fmt.Errorf("events %q %v", ev, err)
		}
		return nil
	})
	if j, err := getJob(a, keep); err != nil || j.Job.State != "running" || j.latest().Num != 1 || j.latest().CancelRequested != "" {
		t.Fatalf("keep job after the fault: %v %v", j, err)
	}
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
	waitJobState(t, a, keep, "succeeded")
	if j := waitJobState(t, a, rq, "succeeded"); j.Job.CountedAttempts != 1 {
		t.Fatalf("requeue job used %d attempts, want 1 (the stop is not counted): %s", j.Job.CountedAttempts, j)
	}
}

// TestSystemGPUHealthGang: a packed gang of two 1-GPU tasks with
// --on-gpu-error requeue on the fake two-GPU host. A critical XID on one
// task's device stops both tasks (gpu_error, then gang) without using an
// attempt; the gang waits queued, since one healthy GPU cannot hold it;
// `node gpu-reset` lets it be placed again, and each task's next attempt
// finds what its previous one wrote to $FOREMAN_CHECKPOINT.
func TestSystemGPUHealthGang(t *testing.T) {
	host := gputest.Devices(t)
	kmsg := host.Path("dev/kmsg")
	if err := syscall.Mkfifo(kmsg, 0o600); err != nil {
		t.Fatal(err)
	}
	c := newSysCluster(t, 1, "--gpu-root", host.Dir)
	a := c.agents[0]
	cli := func(args ...string) cliResult {
		t.Helper()
		return runForeman(t, c.bin, a.url(""), args...)
	}
	w, err := os.OpenFile(kmsg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	eventually(t, systemTimeout, "n1 advertises its 2 GPUs", func() error {
		var nd gpuNodeView
		r := cli("node", "show", "n1", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &nd); err != nil || nd.Capacity.Named["gpu"] != 2 {
			return fmt.Errorf("node show: %v %s", err, r.stdout)
		}
		return nil
	})
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	// Each run appends "<attempt> <task> <uuid> <checkpoint>", then marks
	// its checkpoint and waits.
	script := fmt.Sprintf(`echo "$FOREMAN_ATTEMPT $GANG_INDEX $FOREMAN_GPU_UUIDS $(cat "$FOREMAN_CHECKPOINT/mark" 2>/dev/null || echo none)" >> %[1]s/runs
echo "was-$FOREMAN_ATTEMPT" > "$FOREMAN_CHECKPOINT/mark"
while [ ! -e %[1]s/release ]; do sleep 0.2; done`, dir)
	r := cli("submit", "--gang", "2", "--gang-pack", "--gpus", "1", "--on-gpu-error", "requeue", "--driver", "process", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	runs := func() [][]string {
		b, _ := os.ReadFile(filepath.Join(dir, "runs"))
		var out [][]string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(l); len(f) == 4 {
				out = append(out, f)
			}
		}
		return out
	}
	eventually(t, systemTimeout, "both tasks running", func() error {
		if n := len(runs()); n != 2 {
			return fmt.Errorf("%d runs", n)
		}
		return nil
	})
	first := runs()
	bad := first[0][2]
	busOf := map[string]string{}
	for _, g := range host.GPUs {
		busOf[g.UUID] = strings.TrimSuffix(g.BusID, ".0")
	}
	fmt.Fprintf(w, "4,200,200,-;NVRM: Xid (PCI:%s): 79, pid=1, name=python3, GPU has fallen off the bus.\n", busOf[bad])
	eventually(t, systemTimeout, "the gang stopped and queued, nothing counted", func() error {
		j, err := getJob(a, id)
		if err != nil {
			return err
		}
		if j.Job.State != "queued" || len(j.Attempts) != 2 || j.Job.CountedAttempts != 0 {
			return fmt.Errorf("%s", j)
		}
		reasons := j.Attempts[0].Reason + " | " + j.Attempts[1].Reason
		if !strings.Contains(reasons, "gpu_error: "+bad) || !strings.Contains(reasons, "gang") {
			return fmt.Errorf("attempt reasons %q", reasons)
		}
		return nil
	})
	if r := cli("node", "gpu-reset", "n1"); r.code != 0 || !strings.Contains(r.stdout, bad) {
		t.Fatalf("gpu-reset: %d %s %s", r.code, r.stdout, r.stderr)
	}
	eventually(t, systemTimeout, "the gang placed again, each task with its checkpoint", func() error {
		if n := len(runs()); n != 4 {
			return fmt.Errorf("%d runs", n)
		}
		return nil
	})
	prev := map[string]string{} // task -> its first attempt
	for _, f := range first {
		prev[f[1]] = f[0]
	}
	for _, f := range runs()[2:] {
		if f[0] != "3" && f[0] != "4" || f[3] != "was-"+prev[f[1]] {
			t.Errorf("run %q: want attempt 3 or 4 restoring task %s's checkpoint was-%s", f, f[1], prev[f[1]])
		}
	}
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
	// A gang counts only its tasks' failures: the stop used none.
	if j := waitJobState(t, a, id, "succeeded"); j.Job.CountedAttempts != 0 || len(j.Attempts) != 4 {
		t.Fatalf("the gang: %s, want 4 attempts, none counted", j)
	}
}

// TestSystemGPUTorchrunExample runs README's torchrun example
// (testdata/jobs/torchrun-gang.yaml) as written, packed on the fake
// two-GPU host with one GPU per task and a stand-in torchrun that records
// its arguments and GPU variables: each task's torchrun is told the gang's
// size, its rank, one worker per GPU and task 0's reserved port as the
// rendezvous, and sees exactly its own GPU as CUDA device 0.
func TestSystemGPUTorchrunExample(t *testing.T) {
	host := gputest.Devices(t)
	c := newSysCluster(t, 1, "--gpu-root", host.Dir)
	a := c.agents[0]
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	writeExec(t, filepath.Join(dir, "torchrun"), `#!/bin/sh
echo "$* CVD=$CUDA_VISIBLE_DEVICES UUIDS=$FOREMAN_GPU_UUIDS INDEX=$GANG_INDEX PEERS=$GANG_PEERS" >> `+dir+`/torchrun.log
`)
	eventually(t, systemTimeout, "n1 advertises its 2 GPUs", func() error {
		var nd gpuNodeView
		r := runForeman(t, c.bin, a.url(""), "node", "show", "n1", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &nd); err != nil || nd.Capacity.Named["gpu"] != 2 {
			return fmt.Errorf("node show: %v %s", err, r.stdout)
		}
		return nil
	})
	r := runForeman(t, c.bin, a.url(""), "submit", "-f", "testdata/jobs/torchrun-gang.yaml", "--gpus", "1", "--gang-pack",
		"--env", "PATH="+dir+":/usr/bin:/bin")
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	waitJobState(t, a, id, "succeeded")
	b, _ := os.ReadFile(filepath.Join(dir, "torchrun.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("torchrun ran %d times:\n%s", len(lines), b)
	}
	uuids := map[string]bool{}
	for _, l := range lines {
		var index, peers, uuid string
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "INDEX="); ok {
				index = v
			}
			if v, ok := strings.CutPrefix(f, "PEERS="); ok {
				peers = v
			}
			if v, ok := strings.CutPrefix(f, "UUIDS="); ok {
				uuid = v
			}
		}
		master, _, _ := strings.Cut(peers, ",")
		host, port, _ := strings.Cut(master, ":")
		want := fmt.Sprintf("--nnodes=2 --node-rank=%s --nproc-per-node=1 --master-addr=%s --master-port=%s train.py --checkpoint-dir ", index, host, port)
		if p, err := strconv.Atoi(port); !strings.HasPrefix(l, want) || !strings.Contains(l, " CVD=0 ") || host == "" || err != nil || p < 31000 || p > 31999 {
			t.Errorf("torchrun %q\nwant it to start with %q and CUDA_VISIBLE_DEVICES=0", l, want)
		}
		uuids[uuid] = true
	}
	if len(uuids) != 2 {
		t.Errorf("the tasks' GPUs %v: want two distinct devices", uuids)
	}
}
