package exec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/exec/gpu/gputest"
	"github.com/foreman-sched/foreman/fsm"
)

// TestOverWatch: a job is reported once, after staying over for more than
// the grace; dipping under starts the count again.
func TestOverWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	o := newOverWatch(10 * time.Second)
	steps := []struct {
		sec  int
		over bool
		fire bool
	}{
		{0, true, false}, {6, true, false}, {8, false, false}, // dipped under: the count restarts
		{10, true, false}, {20, true, false}, // exactly the grace: not yet
		{21, true, true}, {30, true, false}, // once
	}
	for _, s := range steps {
		if got := o.observe(at(s.sec), "a", s.over); got != s.fire {
			t.Fatalf("at %ds over=%v: fired %v, want %v", s.sec, s.over, got, s.fire)
		}
	}
	o.keep(map[string]bool{})
	if len(o.since)+len(o.fired) != 0 {
		t.Fatalf("ended attempts kept: %v %v", o.since, o.fired)
	}
}

func TestGPUMemorySlack(t *testing.T) {
	for _, c := range []struct{ share, slack int64 }{{1024, 256}, {20480, 1024}, {61440, 3072}} {
		if got := gpuMemorySlack(c.share); got != c.slack {
			t.Errorf("slack of %d MiB = %d, want %d", c.share, got, c.slack)
		}
	}
}

// TestWorkerGPUShareWatchdogKill runs a share attempt through the worker on
// a fake GPU host (no dmem) whose fake nvidia-smi lists the job's own
// process using 4 GiB of its 1 GiB share: the worker reports the over-use
// and, in kill mode, the attempt ends killed with the reason.
func TestWorkerGPUShareWatchdogKill(t *testing.T) {
	root := gputest.Devices(t)
	g := root.GPUs[0]
	smi := root.Path("nvidia-smi")
	if err := os.WriteFile(smi, []byte("#!/bin/sh\ncase \"$*\" in\n--query-compute-apps=*) cat "+root.Path("apps.csv")+" 2> /dev/null ;;\n*) exit 2 ;;\nesac\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dataDir(t))
	cfg.GPURoot, cfg.NvidiaSMI, cfg.JobsCgroup = root.Dir, smi, "/foreman-test-watchdog"
	cfg.GPUMemoryOver, cfg.GPUMemoryWatchEvery, cfg.GPUMemoryGrace = GPUMemoryKill, 20*time.Millisecond, 0
	t.Cleanup(func() {
		cpu, _ := cpuCgroupRoot()
		dev, _, _ := gpu.DevicesMount()
		waitFor(t, waitShort, "the test's cgroups to be removable", func() bool {
			for _, d := range []string{cpu, dev} {
				os.Remove(d + cfg.JobsCgroup + "/process")
				os.Remove(d + cfg.JobsCgroup)
			}
			_, err := os.Stat(cpu + cfg.JobsCgroup)
			return err != nil
		})
	})
	state := newFakeState()
	h := startWorker(t, state, cfg)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	state.assign("job-share", fsm.JobSpec{Command: sh(`echo "$FOREMAN_GPU_MEMORY_MIB $CUDA_VISIBLE_DEVICES" > ` + dir + `/env; echo $$ > ` + dir + `/pid.tmp; mv ` + dir + `/pid.tmp ` + dir + `/pid; exec sleep 60`)},
		func(a *Assignment) { a.Attempt.GPUShare = &fsm.GPUShare{GPU: g, MemoryMiB: 1024} })
	var pid string
	waitFor(t, waitShort, "the job's pid", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "pid"))
		pid = strings.TrimSpace(string(b))
		return pid != ""
	})
	if env := readFile(t, filepath.Join(dir, "env")); env != "1024 0\n" {
		t.Fatalf("the job saw FOREMAN_GPU_MEMORY_MIB, CUDA_VISIBLE_DEVICES = %q", env)
	}
	os.MkdirAll(root.Path("proc"), 0o755)
	if err := os.Symlink("/proc/"+pid, root.Path("proc/"+pid)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root.Path("apps.csv"), []byte(pid+", "+g.UUID+", 4096\n999999, "+g.UUID+", 8192\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.waitFinal(t, "job-share", waitShort)
	want := "gpu_memory: 4096 MiB used of a 1024 MiB share on " + g.UUID
	if r.State != fsm.AttemptKilled || r.Reason != want {
		t.Fatalf("final %s %q, want killed %q", r.State, r.Reason, want)
	}
	state.mu.Lock()
	defer state.mu.Unlock()
	overs := 0
	for _, rep := range state.reports {
		if rep.State == fsm.ReportGPUMemoryOver {
			overs++
			if o := rep.GPUMemoryOver; o == nil || o.UsedMiB != 4096 || o.ShareMiB != 1024 || o.Action != GPUMemoryKill {
				t.Errorf("over-use report %+v", rep.GPUMemoryOver)
			}
		}
	}
	if overs != 1 {
		t.Fatalf("%d over-use reports, want 1", overs)
	}
}
