package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// holdJobs submits k long jobs for the clients and waits until each is held.
func holdJobs(ctx context.Context, cl *httpapi.Client, f *simFleet, run string, k int, timeout time.Duration) ([]string, error) {
	spec := noopSpec(run, "")
	spec.Name = "bench-long"
	spec.Constraints = []string{"sim == " + run}
	specs := make([]httpapi.JobSpecInput, k)
	for i := range specs {
		specs[i] = spec
	}
	subs, err := cl.SubmitJobs(ctx, specs)
	if err != nil {
		return nil, fmt.Errorf("submit long jobs: %w", err)
	}
	ids := make([]string, 0, k)
	jobs := map[string]bool{}
	for _, s := range subs {
		ids = append(ids, s.ID)
		jobs[s.ID] = true
	}
	return ids, waitFor(ctx, timeout, func() (bool, string) {
		held := 0
		for _, js := range f.holders(jobs) {
			held += len(js)
		}
		return held == k, fmt.Sprintf("%d/%d long jobs held", held, k)
	})
}

// judgeHeld counts held jobs that were rerun or failed.
func judgeHeld(ctx context.Context, cl *httpapi.Client, ids []string, r *disruptResult) error {
	r.Held = len(ids)
	for _, id := range ids {
		j, err := cl.GetJob(ctx, id, false)
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

// reattach waits until every live client has had a beat confirmed after t.
func reattach(ctx context.Context, f *simFleet, t time.Time, timeout time.Duration) (time.Duration, error) {
	err := waitFor(ctx, timeout, func() (bool, string) {
		n, live := f.confirmedSince(t)
		return n == live, fmt.Sprintf("%d/%d clients confirmed again", n, live)
	})
	return time.Since(t), err
}

// starve runs 4 busy loops per core for d: a load of at least 4× the
// cores, which starves the servers and the simulator alike.
func starve(ctx context.Context, f *simFleet, d, timeout time.Duration, judge func(*disruptResult) error) (disruptResult, error) {
	var r disruptResult
	lost0 := f.falseLost.Load()
	n := 4 * runtime.NumCPU()
	cli.Stderrf("bench nodes: starving the machine for %s (%d busy loops)", d, n)
	var burners []*exec.Cmd
	defer func() {
		for _, b := range burners {
			_ = b.Process.Kill()
			_ = b.Wait()
		}
	}()
	for range n {
		b := exec.Command("sh", "-c", "while :; do :; done")
		if err := b.Start(); err != nil {
			return r, fmt.Errorf("start a busy loop: %w", err)
		}
		burners = append(burners, b)
	}
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(d):
	}
	for _, b := range burners {
		_ = b.Process.Kill()
		_ = b.Wait()
	}
	burners = nil
	took, err := reattach(ctx, f, time.Now(), timeout)
	if err != nil {
		return r, err
	}
	r.ReattachS = round3(took.Seconds())
	r.FalseLost = f.falseLost.Load() - lost0
	return r, judge(&r)
}

// killLeader kills the leader (a process on this host listening on
// leaderAddr's port) with -9.
func killLeader(ctx context.Context, f *simFleet, leaderAddr string, timeout time.Duration, judge func(*disruptResult) error) (disruptResult, error) {
	var r disruptResult
	_, portStr, err := splitHostPort(leaderAddr)
	if err != nil {
		return r, err
	}
	port, _ := strconv.Atoi(portStr)
	pid, err := pidListeningOn(port)
	if err != nil {
		return r, fmt.Errorf("the leader's process: %w", err)
	}
	lost0 := f.falseLost.Load()
	cli.Stderrf("bench nodes: killing the leader (pid %d, %s) with -9", pid, leaderAddr)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return r, fmt.Errorf("kill the leader: %w", err)
	}
	took, err := reattach(ctx, f, killed, timeout)
	if err != nil {
		return r, err
	}
	r.ReattachS = round3(took.Seconds())
	r.FalseLost = f.falseLost.Load() - lost0
	return r, judge(&r)
}

func splitHostPort(url string) (host, port string, err error) {
	hp := url[strings.Index(url, "://")+3:]
	i := strings.LastIndexByte(hp, ':')
	if i < 0 {
		return "", "", fmt.Errorf("%s: no port", url)
	}
	return hp[:i], hp[i+1:], nil
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
