package container

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

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
