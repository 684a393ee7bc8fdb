package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/httpapi"
)

// The disruption phases of foreman bench nodes (issue 23): with long jobs
// held by the simulated clients, starve the whole machine (servers and
// simulator alike) or kill the leader with -9, then check that no held job
// was taken from its live client, failed or run twice, and time how long
// until every client has a beat confirmed again.

// disruptResult is one disruption's outcome.
type disruptResult struct {
	Held      int     `json:"held"`             // long jobs held by clients through it
	ReattachS float64 `json:"reattach_seconds"` // its end → every live client confirmed again
	FalseLost int64   `json:"false_lost"`       // attempts taken from a live client meanwhile
	Rerun     int     `json:"rerun"`            // held jobs with a second attempt
	Failed    int     `json:"failed"`           // held jobs that failed
}

// holdJobs submits k long jobs (bench-long: a sim holds one until the run
// ends) for the clients and waits until each is held.
func holdJobs(ctx context.Context, cl *api.Client, f *simFleet, run string, k int, timeout time.Duration) (map[string]bool, error) {
	spec := noopSpec(run, "")
	spec.Name = "bench-long"
	spec.Constraints = []string{"sim == " + run}
	three := 3
	spec.MaxAttempts = &three
	specs := make([]httpapi.JobSpecInput, k)
	for i := range specs {
		specs[i] = spec
	}
	subs, err := submitJobs(ctx, cl, specs)
	if err != nil {
		return nil, fmt.Errorf("submit long jobs: %w", err)
	}
	jobs := map[string]bool{}
	for _, s := range subs {
		jobs[s.ID] = true
	}
	return jobs, waitFor(ctx, timeout, func() (bool, string) {
		held := 0
		for _, js := range f.holders(jobs) {
			held += len(js)
		}
		return held == k, fmt.Sprintf("%d/%d long jobs held", held, k)
	})
}

// judgeHeld counts held jobs that were rerun or failed.
func judgeHeld(ctx context.Context, cl *api.Client, jobs map[string]bool, r *disruptResult) error {
	r.Held = len(jobs)
	for id := range jobs {
		j, err := cl.GetJob(ctx, id)
		if err != nil {
			return fmt.Errorf("job %s: %w", id, err)
		}
		if len(j.Attempts) > 1 {
			r.Rerun++
		}
		if j.Job.State == "failed" {
			r.Failed++
		}
	}
	return nil
}

// settle waits until every live client has had a beat confirmed after t
// (the end of a disruption), then counts what the disruption cost.
func settle(ctx context.Context, f *simFleet, t time.Time, lost0 int64, timeout time.Duration, judge func(*disruptResult) error) (disruptResult, error) {
	var r disruptResult
	err := waitFor(ctx, timeout, func() (bool, string) {
		n, live := f.confirmedSince(t)
		return n == live, fmt.Sprintf("%d/%d clients confirmed again", n, live)
	})
	if err != nil {
		return r, err
	}
	r.ReattachS = round3(time.Since(t).Seconds())
	r.FalseLost = f.falseLost.Load() - lost0
	return r, judge(&r)
}

// starve runs 4 busy loops per core for d: a load of at least 4× the
// cores, which starves the servers and the simulator alike.
func starve(ctx context.Context, f *simFleet, d, timeout time.Duration, judge func(*disruptResult) error) (disruptResult, error) {
	lost0 := f.falseLost.Load()
	n := 4 * runtime.NumCPU()
	cli.Stderrf("bench nodes: starving the machine for %s (%d busy loops)", d, n)
	var burners []*exec.Cmd
	stop := func() {
		for _, b := range burners {
			_ = b.Process.Kill()
			_ = b.Wait()
		}
		burners = nil
	}
	defer stop()
	for range n {
		b := exec.Command("sh", "-c", "while :; do :; done")
		if err := b.Start(); err != nil {
			return disruptResult{}, fmt.Errorf("start a busy loop: %w", err)
		}
		burners = append(burners, b)
	}
	if err := pause(ctx, d); err != nil {
		return disruptResult{}, err
	}
	stop()
	return settle(ctx, f, time.Now(), lost0, timeout, judge)
}

// killLeader kills the leader (a process on this host listening on
// leaderAddr's port) with -9.
func killLeader(ctx context.Context, f *simFleet, leaderAddr string, timeout time.Duration, judge func(*disruptResult) error) (disruptResult, error) {
	u, err := url.Parse(leaderAddr)
	if err != nil {
		return disruptResult{}, err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return disruptResult{}, fmt.Errorf("%s: no port", leaderAddr)
	}
	pid, err := pidListeningOn(port)
	if err != nil {
		return disruptResult{}, fmt.Errorf("the leader's process: %w", err)
	}
	lost0 := f.falseLost.Load()
	cli.Stderrf("bench nodes: killing the leader (pid %d, %s) with -9", pid, leaderAddr)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return disruptResult{}, fmt.Errorf("kill the leader: %w", err)
	}
	return settle(ctx, f, killed, lost0, timeout, judge)
}

// pidListeningOn finds the process with a TCP socket listening on port
// (Linux: /proc/net/tcp{,6} give the socket's inode, /proc/PID/fd the
// process holding it).
func pidListeningOn(port int) (int, error) {
	want := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	for _, p := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(fs) > 9 && strings.HasSuffix(fs[1], want) && fs[3] == "0A" {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
		fh.Close()
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("no socket listens on port %d here", port)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if l, err := os.Readlink(fd); err == nil && inodes[l] {
			return strconv.Atoi(strings.Split(fd, "/")[2])
		}
	}
	return 0, errors.New("no process here holds its socket (run the bench as the servers' user, on their host)")
}
