package exec

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/fsm"
)

// BenchmarkProcessStart measures the process driver alone: Start until the
// first stdout byte of `echo` (compare with the container driver), and
// Start until `true` has exited.
func BenchmarkProcessStart(b *testing.B) {
	d := NewProcessDriver()
	work := b.TempDir()
	for _, cmd := range [][]string{{"echo", "x"}, {"true"}} {
		b.Run(cmd[0], func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				r, w, err := os.Pipe()
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				h, err := d.Start(context.Background(), &Task{
					ID: "bench", Spec: fsm.JobSpec{Command: cmd}, Env: []string{"PATH=" + defaultPath},
					WorkDir: work, Stdout: w, Stderr: w,
				})
				if err != nil {
					b.Fatal(err)
				}
				w.Close()
				if cmd[0] == "echo" {
					buf := make([]byte, 1)
					if _, err := r.Read(buf); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
					h.Wait()
				} else {
					h.Wait()
					lat = append(lat, time.Since(t0))
				}
				h.Destroy()
				r.Close()
			}
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkProcessFloor is the ceiling of a node that does nothing but run
// no-op jobs: one worker per CPU starting `true` through the process driver
// and waiting for it, no scheduler, supervisor or agent. jobs/s is the most
// completed process jobs a second this host can give; cpu-ms/op is what
// each costs here (getrusage of this process and its reaped children).
func BenchmarkProcessFloor(b *testing.B) {
	d := NewProcessDriver()
	work := b.TempDir()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	one := func() error {
		h, err := d.Start(context.Background(), &Task{
			ID: "floor", Spec: fsm.JobSpec{Command: []string{"true"}}, Env: []string{"PATH=" + defaultPath},
			WorkDir: work, Stdout: devnull, Stderr: devnull,
		})
		if err != nil {
			return err
		}
		st := h.Wait()
		h.Destroy()
		if st.ExitCode != 0 {
			return fmt.Errorf("true exited %d", st.ExitCode)
		}
		return nil
	}
	var self0, kids0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &self0)
	unix.Getrusage(unix.RUSAGE_CHILDREN, &kids0)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	t0 := time.Now()
	b.ResetTimer()
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) && failed.Load() == nil {
				if err := one(); err != nil {
					failed.Store(&err)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	elapsed := time.Since(t0)
	var self1, kids1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &self1)
	unix.Getrusage(unix.RUSAGE_CHILDREN, &kids1)
	cpu := self1.Utime.Nano() - self0.Utime.Nano() + self1.Stime.Nano() - self0.Stime.Nano() +
		kids1.Utime.Nano() - kids0.Utime.Nano() + kids1.Stime.Nano() - kids0.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
}

// BenchmarkWorkerStart is the node's share of submit→start: from the
// assignment appearing in the (fake) state until the worker reports the
// attempt running — attempt dir, task.json, supervisor fork/exec, driver
// start, lease socket event, report.
func BenchmarkWorkerStart(b *testing.B) {
	state := newFakeState()
	reports := make(chan fsm.ReportAttempt, 16)
	state.onReport = func(r fsm.ReportAttempt) { reports <- r }
	startWorker(b, state, testConfig(b, dataDir(b)))
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		job := fmt.Sprintf("bench-%d", i)
		t0 := time.Now()
		state.assign(job, fsm.JobSpec{Command: []string{"true"}})
		for done := false; !done; {
			select {
			case r := <-reports:
				if r.State == fsm.AttemptRunning {
					lat = append(lat, time.Since(t0))
				} else {
					done = true
				}
			case <-time.After(waitLong):
				b.Fatal("no report")
			}
		}
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*95/100]), "p95-ms")
}

// BenchmarkRecycledAttempts runs no-op attempts one after another through
// one recycled supervisor and reports the CPU each costs: in the worker
// (this process), in the supervisor, and in the job (`true`), read from
// /proc (utime+stime; the job's is the supervisor's reaped children).
func BenchmarkRecycledAttempts(b *testing.B) {
	state := newFakeState()
	cfg := testConfig(b, dataDir(b))
	cfg.WarmSupervisors, cfg.MaxIdleSupervisors = 0, 1
	h := startWorker(b, state, cfg)
	run := func(job string) {
		state.assign(job, fsm.JobSpec{Command: []string{"true"}})
		h.waitFinal(b, job, waitLong)
		waitFor(b, waitShort, "the supervisor idle", func() bool { return h.w.pool.len() == 1 })
	}
	run("warmup")
	pid := supervisorPID(b, h.dir("warmup"))
	self0, sup0, jobs0 := cpuOf(b, os.Getpid()), cpuOf(b, pid), childCPUOf(b, pid)
	t0 := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(fmt.Sprintf("bench-%d", i))
	}
	b.StopTimer()
	elapsed := time.Since(t0)
	if p := supervisorPID(b, h.dir(fmt.Sprintf("bench-%d", b.N-1))); p != pid {
		b.Fatalf("the last attempt ran under %d, not the recycled %d", p, pid)
	}
	n := float64(b.N)
	b.ReportMetric(float64(cpuOf(b, os.Getpid())-self0)/1e6/n, "worker-cpu-ms/op")
	b.ReportMetric(float64(cpuOf(b, pid)-sup0)/1e6/n, "supervisor-cpu-ms/op")
	b.ReportMetric(float64(childCPUOf(b, pid)-jobs0)/1e6/n, "job-cpu-ms/op")
	b.ReportMetric(n/elapsed.Seconds(), "attempts/s")
}

// BenchmarkSaturatedBurst: bursts of twelve no-op attempts on a host made
// to look saturated (claim.go) and on a calm one; supervisors/attempt is
// how many processes were started per attempt (a process each is 1).
func BenchmarkSaturatedBurst(b *testing.B) {
	for _, saturated := range []bool{true, false} {
		b.Run(fmt.Sprintf("saturated=%v", saturated), func(b *testing.B) {
			defer func(f func(int, int) func() bool) { hostSaturation = f }(hostSaturation)
			hostSaturation = func(int, int) func() bool { return func() bool { return saturated } }
			state := newFakeState()
			cfg := testConfig(b, dataDir(b))
			cfg.WarmSupervisors, cfg.MaxIdleSupervisors = 1, 16
			h := startWorker(b, state, cfg)
			const n = 12
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range n {
					state.assign(fmt.Sprintf("b%d-%d", i, j), fsm.JobSpec{Command: []string{"true"}})
				}
				for j := range n {
					h.waitFinal(b, fmt.Sprintf("b%d-%d", i, j), waitLong)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(h.w.spawned.Load())/float64(n*b.N), "supervisors/attempt")
		})
	}
}

// cpuOf and childCPUOf read utime+stime and cutime+cstime of pid, in ns.
func cpuOf(b testing.TB, pid int) int64      { return procTimes(b, pid, 11) }
func childCPUOf(b testing.TB, pid int) int64 { return procTimes(b, pid, 13) }

func procTimes(b testing.TB, pid, field int) int64 {
	s := readFile(b, fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var u, k int64
	fmt.Sscan(f[field], &u)
	fmt.Sscan(f[field+1], &k)
	return (u + k) * int64(time.Second) / 100 // USER_HZ
}
