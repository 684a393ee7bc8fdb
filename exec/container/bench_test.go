package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
)

// BenchmarkContainerStart measures Start → first stdout byte (then Wait and
// Destroy, untimed) for the container driver with and without the PID-1
// shim, and for the process driver as the baseline. Run with:
//
//	go test -run '^$' -bench ContainerStart -benchtime 30x ./exec/container
func BenchmarkContainerStart(b *testing.B) {
	requireContainers(b)
	b.Run("container+shim", func(b *testing.B) { benchStart(b, newTestDriver(b, nil)) })
	b.Run("container-noshim", func(b *testing.B) {
		benchStart(b, newTestDriver(b, func(c *Config) { c.NoShim = true }))
	})
	b.Run("process", func(b *testing.B) { benchStart(b, exec.NewProcessDriver()) })
}

func benchStart(b *testing.B, d exec.Driver) {
	spec := fsm.JobSpec{Command: []string{"/bin/echo", "x"}, Resources: fsm.Resources{CPU: 1000, MemoryMB: 256}}
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		dir := b.TempDir()
		work := filepath.Join(dir, "work")
		os.Mkdir(work, 0o755)
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		errf, _ := os.Create(filepath.Join(dir, "stderr"))
		task := &exec.Task{ID: "bench-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i), Spec: spec,
			Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir, WorkDir: work, Stdout: w, Stderr: errf}
		b.StartTimer()
		start := time.Now()
		h, err := d.Start(context.Background(), task)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := r.Read(buf); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		w.Close()
		h.Wait()
		h.Destroy()
		r.Close()
		errf.Close()
		b.StartTimer()
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "ms-p95")
}

// BenchmarkContainerCPU runs `true` containers (network none, the
// throughput bench's job) through Start, Wait and Destroy, conc at a time,
// and reports the CPU they cost: this process (the supervisor's side) plus
// every reaped child (runc init, shim, job), user and system. Kernel work
// done later in kworkers (netns cleanup, cgroup release) is not in
// getrusage; DESIGN.md has the perf breakdown.
//
//	go test -run '^$' -bench ContainerCPU -benchtime 100x ./exec/container
func BenchmarkContainerCPU(b *testing.B) {
	requireContainers(b)
	for _, conc := range []int{1, 8} {
		b.Run("conc="+strconv.Itoa(conc), func(b *testing.B) { benchCPU(b, conc) })
	}
}

func benchCPU(b *testing.B, conc int) {
	d := newTestDriver(b, nil)
	if err := d.Warm(); err != nil {
		b.Fatal(err)
	}
	spec := fsm.JobSpec{Command: []string{"true"}}
	dir := b.TempDir()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	var seq atomic.Int64
	one := func() error {
		i := strconv.FormatInt(seq.Add(1), 10)
		work := filepath.Join(dir, "w"+i)
		if err := os.Mkdir(work, 0o755); err != nil {
			return err
		}
		task := &exec.Task{ID: "cpu-" + strconv.Itoa(os.Getpid()) + "-" + i, Spec: spec,
			Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir, WorkDir: work, Stdout: devnull, Stderr: devnull}
		h, err := d.Start(context.Background(), task)
		if err != nil {
			return err
		}
		if st := h.Wait(); st.ExitCode != 0 {
			h.Destroy()
			return fmt.Errorf("exit %d", st.ExitCode)
		}
		return h.Destroy()
	}
	var self0, kids0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &self0)
	unix.Getrusage(unix.RUSAGE_CHILDREN, &kids0)
	b.ResetTimer()
	t0 := time.Now()
	work := make(chan struct{})
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if err := one(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range b.N {
		select {
		case work <- struct{}{}:
		case err := <-errs:
			close(work)
			wg.Wait()
			b.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.StopTimer()
	elapsed := time.Since(t0)
	var self1, kids1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &self1)
	unix.Getrusage(unix.RUSAGE_CHILDREN, &kids1)
	ms := func(a, b unix.Timeval) float64 { return float64(b.Nano()-a.Nano()) / 1e6 }
	n := float64(b.N)
	su, ss := ms(self0.Utime, self1.Utime)/n, ms(self0.Stime, self1.Stime)/n
	cu, cs := ms(kids0.Utime, kids1.Utime)/n, ms(kids0.Stime, kids1.Stime)/n
	b.ReportMetric(su, "self-user-ms/op")
	b.ReportMetric(ss, "self-sys-ms/op")
	b.ReportMetric(cu, "child-user-ms/op")
	b.ReportMetric(cs, "child-sys-ms/op")
	b.ReportMetric(su+ss+cu+cs, "cpu-ms/op")
	b.ReportMetric(n/elapsed.Seconds(), "starts/s")
}
