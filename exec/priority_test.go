package exec

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// A job runs below the agent: at SupervisorNice, and (as root) in the jobs
// cgroup's supervisor leaf, whose parent has the jobs' CPU weight.
func TestJobsRunBelowTheAgent(t *testing.T) {
	cfg := testConfig(t, dataDir(t))
	cfg.JobsCgroup = "/foreman-test/" + strings.ReplaceAll(t.Name(), "/", "_")
	canCgroup := os.Geteuid() == 0
	if !canCgroup {
		if os.Getenv("CI") == "true" {
			t.Fatal("not root: the jobs cgroup cannot be tested")
		}
		t.Log("NOT ROOT: checking nice only, not the jobs cgroup")
		cfg.JobsCPUWeight = 0
	}
	if canCgroup { // runs after the worker's cleanup: its supervisors exit, then the cgroups go
		t.Cleanup(func() {
			root, _ := cpuCgroupRoot()
			waitFor(t, waitShort, "the test's cgroups to be removable", func() bool {
				os.Remove(root + cfg.JobsCgroup + "/supervisor")
				os.Remove(root + cfg.JobsCgroup)
				os.Remove(root + "/foreman-test")
				_, err := os.Stat(root + cfg.JobsCgroup)
				return err != nil
			})
		})
	}
	state := newFakeState()
	h := startWorker(t, state, cfg)
	// Field 19 of /proc/self/stat is nice; the command's name has no spaces.
	state.assign("job-nice", fsm.JobSpec{Command: sh(`cut -d' ' -f19 /proc/self/stat; grep -E ':(cpu|cpu,cpuacct|):' /proc/self/cgroup | head -1`)})
	r := h.waitFinal(t, "job-nice", waitShort)
	if r.State != fsm.AttemptSucceeded {
		t.Fatalf("job %s: %s", r.State, r.Reason)
	}
	var out bytes.Buffer
	if err := h.w.StreamLog(context.Background(), "job-nice", 1, "stdout", false, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[0] != "10" {
		t.Errorf("job's nice = %q, want 10 (SupervisorNice)", lines[0])
	}
	if canCgroup {
		if len(lines) < 2 || !strings.HasSuffix(lines[1], cfg.JobsCgroup+"/supervisor") {
			t.Errorf("job's cpu cgroup = %q, want %s/supervisor", lines[1:], cfg.JobsCgroup)
		}
		root, v2 := cpuCgroupRoot()
		file, want := "cpu.shares", "204"
		if v2 {
			file, want = "cpu.weight", "20"
		}
		b, err := os.ReadFile(root + cfg.JobsCgroup + "/" + file)
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q (%v), want %s", file, b, err, want)
		}
	}
}
