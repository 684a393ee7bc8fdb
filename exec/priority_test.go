package exec

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// A process job runs below the agent: at JobNice, and (as root) in the jobs
// cgroup's process leaf, whose parent has the jobs' CPU weight. Its
// supervisor keeps the agent's priority and cgroup.
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
				os.Remove(root + cfg.JobsCgroup + "/process")
				os.Remove(root + cfg.JobsCgroup)
				os.Remove(root + "/foreman-test")
				_, err := os.Stat(root + cfg.JobsCgroup)
				return err != nil
			})
		})
	}
	state := newFakeState()
	h := startWorker(t, state, cfg)
	// Field 19 of /proc/PID/stat is nice; the commands' names have no
	// spaces. The job's parent is its supervisor.
	cgroupOf := func(pid string) string { return `grep -E ':(cpu|cpu,cpuacct|):' /proc/` + pid + `/cgroup | head -1` }
	state.assign("job-nice", fsm.JobSpec{Command: sh(`cut -d' ' -f19 /proc/self/stat; ` + cgroupOf("self") +
		`; cut -d' ' -f19 /proc/$PPID/stat; ` + cgroupOf("$PPID"))})
	r := h.waitFinal(t, "job-nice", waitShort)
	if r.State != fsm.AttemptSucceeded {
		t.Fatalf("job %s: %s", r.State, r.Reason)
	}
	var out bytes.Buffer
	if err := h.w.StreamLog(context.Background(), "job-nice", 1, "stdout", false, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("job's output = %q, want its nice and cgroup, then its supervisor's", lines)
	}
	if lines[0] != "10" {
		t.Errorf("job's nice = %q, want 10 (JobNice)", lines[0])
	}
	if lines[2] != "0" {
		t.Errorf("supervisor's nice = %q, want the agent's 0", lines[2])
	}
	if strings.Contains(lines[3], cfg.JobsCgroup) {
		t.Errorf("supervisor's cpu cgroup = %q, want the agent's, not the jobs'", lines[3])
	}
	if canCgroup {
		if !strings.HasSuffix(lines[1], cfg.JobsCgroup+"/process") {
			t.Errorf("job's cpu cgroup = %q, want %s/process", lines[1], cfg.JobsCgroup)
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

// The job launcher's thread, at the job nice, is never the supervisor's
// main thread, whose nice ps and /proc/PID/stat show as the process's. A
// goroutine that locks a thread right after its spawner blocks mostly ran
// on the main one: a supervisor looked as if it ran below the agent (CI).
// Each run is a fresh process that starts the launcher the way
// SuperviseMain does, first thing on its main goroutine.
func TestJobLauncherIsNotTheMainThread(t *testing.T) {
	for i := 0; i < 5; i++ {
		cmd := exec.Command(testBinary(t), "launcher-nice")
		cmd.Env = append(os.Environ(), envJobNice+"=10", envJobsCgroup+"=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("run %d: %v: %s", i, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "main 0, launcher 10" {
			t.Fatalf("run %d: %q, want the main thread at 0 and the launcher's at 10", i, got)
		}
	}
}

// launcherNiceMain starts the job launcher and prints the nice of the main
// thread and of the launcher's (the one other thread at a nice not 0).
func launcherNiceMain() int {
	if err := startJobLauncher(); err != nil {
		fmt.Println(err)
		return 1
	}
	niceOf := func(stat string) string {
		b, err := os.ReadFile(stat)
		if err != nil {
			return err.Error()
		}
		// Fields after the command's name, which ends at the last ')':
		// state is field 3, nice field 19.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		return f[19-3]
	}
	launcher := "none"
	tasks, _ := filepath.Glob("/proc/self/task/*/stat")
	for _, stat := range tasks {
		if n := niceOf(stat); n != "0" {
			launcher = n
		}
	}
	fmt.Printf("main %s, launcher %s\n", niceOf("/proc/self/stat"), launcher)
	return 0
}
