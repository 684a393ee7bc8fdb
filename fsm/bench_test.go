package fsm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// benchSubmitEntries pre-encodes count entries of per jobs each.
func benchSubmitEntries(b *testing.B, first uint64, count, per int) []*raft.Log {
	logs := make([]*raft.Log, count)
	for i := range logs {
		idx := first + uint64(i)
		p := SubmitJobs{Jobs: make([]NewJob, per)}
		for j := range p.Jobs {
			p.Jobs[j] = NewJob{
				ID:             fmt.Sprintf("01B%011d%012d", idx, j),
				IdempotencyKey: fmt.Sprintf("key-%d-%d", idx, j),
				Spec: JobSpec{Name: "bench", Command: []string{"/bin/sh", "-c", "echo hello"},
					Resources: Resources{CPU: 500, MemoryMB: 256}, Priority: 50, Labels: map[string]string{"team": "x"}},
			}
		}
		logs[i] = rawEntry(idx, encodeCmd(b, CmdSubmitJobs, t0, p))
	}
	return logs
}

// BenchmarkApplySubmitBatch measures Apply of one SubmitJobs entry of 1 or
// 1000 jobs (one bbolt transaction each), NoSync as in production.
func BenchmarkApplySubmitBatch(b *testing.B) {
	for _, per := range []int{1, 1000} {
		b.Run(fmt.Sprintf("jobs=%d", per), func(b *testing.B) {
			f, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			const chunk = 64 // entries encoded at a time, outside the timer
			var idx uint64 = 1
			n := 0
			var cpu time.Duration
			b.ResetTimer()
			for b.Loop() {
				if n%chunk == 0 {
					b.StopTimer()
					logs := benchSubmitEntries(b, idx, chunk, per)
					b.StartTimer()
					benchBuf = logs
				}
				c0 := cpuTime()
				if r := f.Apply(benchBuf[n%chunk]).(*Result); r.Err != nil {
					b.Fatal(r.Err)
				}
				cpu += cpuTime() - c0
				idx++
				n++
			}
			b.ReportMetric(float64(n*per)/b.Elapsed().Seconds(), "jobs/s")
			// CPU time is steadier than wall time on a shared machine.
			b.ReportMetric(float64(n*per)/cpu.Seconds(), "jobs/cpu-s")
		})
	}
}

var benchBuf []*raft.Log

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSnapshotRestore snapshots and restores a state of
// FOREMAN_BENCH_JOBS jobs (default 100000; 1000000 for the 1M figure).
func BenchmarkSnapshotRestore(b *testing.B) {
	jobs := 100000
	if v := os.Getenv("FOREMAN_BENCH_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("FOREMAN_BENCH_JOBS=%q: want a number >= 1000", v)
		}
		jobs = n
	}
	dir := b.TempDir()
	src, err := Open(filepath.Join(dir, "src.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	for i := 0; i < jobs/1000; i++ {
		for _, l := range benchSubmitEntries(b, uint64(i+1), 1, 1000) {
			src.Apply(l)
		}
	}
	// Bytes of the stored job record itself (the codec's share of the file).
	var recBytes int
	_ = src.View(func(tx *Tx) error {
		return tx.tx.Bucket(bucketJobs).ForEach(func(_, v []byte) error { recBytes += len(v); return nil })
	})
	dst, err := Open(filepath.Join(dir, "dst.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	b.ResetTimer()
	var bytes int
	var restore time.Duration
	snapPath := filepath.Join(dir, "snapshot")
	for b.Loop() {
		bytes = persistToFile(b, src, snapPath)
		in, err := os.Open(snapPath)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := dst.Restore(in); err != nil {
			b.Fatal(err)
		}
		restore += time.Since(start)
	}
	b.ReportMetric(float64(bytes), "snapshot-bytes")
	b.ReportMetric(float64(bytes)/float64(jobs), "snapshot-B/job")
	b.ReportMetric(float64(recBytes)/float64(jobs), "record-B/job")
	b.ReportMetric(restore.Seconds()/float64(b.N), "restore-s")
}

// fileSink is a raft.SnapshotSink over a file (a 1M-job snapshot is too big
// to hold in memory on a shared machine).
type fileSink struct{ *os.File }

func (s fileSink) ID() string    { return "file" }
func (s fileSink) Cancel() error { return s.File.Close() }

func persistToFile(b *testing.B, f *FSM, path string) int {
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := f.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	if err := snap.Persist(fileSink{out}); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return int(st.Size())
}

// BenchmarkCountActive is what a /v1/metrics scrape pays to count the
// active jobs by queue and namespace, with 100,000 of them queued: one
// pass that reads only each job's queue and namespace (jobCountView).
func BenchmarkCountActive(b *testing.B) {
	f, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, l := range benchSubmitEntries(b, 1, 100, 1000) {
		if r := f.Apply(l).(*Result); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	for b.Loop() {
		err := f.View(func(tx *Tx) error {
			c, err := tx.CountActive()
			if err == nil && (len(c.ByQueue) != 1 || c.ByQueue[0].Jobs != 100_000) {
				b.Fatalf("counts %+v", c.ByQueue)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
