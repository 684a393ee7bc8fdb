package exec

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

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
