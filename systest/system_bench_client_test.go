package systest

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkClientFootprint measures what a client agent holds as the
// cluster grows (issue 23: its RSS and data dir must not grow with the
// cluster's job count): 3 servers and one real client; 10 jobs run on the
// client, then 100,000 more (delayed an hour, as foreman bench submit
// makes them) go to the servers. The client's VmRSS (median of 5 samples
// a second apart) and data dir size are taken at 10 and at 100,010 jobs.
// Reported: rss-10-MiB, rss-100k-MiB, rss-ratio, dir-10-KiB,
// dir-100k-KiB, dir-ratio. make bench runs it.
func BenchmarkClientFootprint(b *testing.B) {
	for range b.N {
		c := newSysCluster(b, 3)
		cl := startClients(b, c, 1)[0]
		leader := c.leader()
		for i := range 10 {
			id := submitJob(b, leader, map[string]any{"name": fmt.Sprint("small-", i), "command": []string{"true"},
				"driver": "process", "constraints": []string{"sysnode == c1"}})
			waitJobState(b, leader, id, "succeeded")
		}
		rss10, dir10 := footprint(b, cl)
		if r := runForeman(b, c.bin, leader.url(""), "bench", "submit", "--jobs", "100000", "-c", "4", "--batch", "1000"); r.code != 0 {
			b.Fatalf("bench submit: exit %d %s", r.code, r.stderr)
		}
		// The client has heard every apply's wake-ups by the time a job
		// submitted after them has run there.
		id := submitJob(b, leader, map[string]any{"name": "after", "command": []string{"true"},
			"driver": "process", "constraints": []string{"sysnode == c1"}})
		waitJobState(b, leader, id, "succeeded")
		rss100k, dir100k := footprint(b, cl)
		b.ReportMetric(float64(rss10)/1024, "rss-10-MiB")
		b.ReportMetric(float64(rss100k)/1024, "rss-100k-MiB")
		b.ReportMetric(float64(rss100k)/float64(rss10), "rss-ratio")
		b.ReportMetric(float64(dir10)/1024, "dir-10-KiB")
		b.ReportMetric(float64(dir100k)/1024, "dir-100k-KiB")
		b.ReportMetric(float64(dir100k)/float64(dir10), "dir-ratio")
	}
}

// footprint is a's median VmRSS over 5 samples a second apart (KiB) and
// the bytes under its data dir.
func footprint(tb testing.TB, a *agentProc) (rssKiBMedian int, dirBytes int64) {
	tb.Helper()
	var rss []int
	for i := range 5 {
		if i > 0 {
			time.Sleep(time.Second) // sampling, not synchronising
		}
		rss = append(rss, rssKiB(a.cmd.Process.Pid))
	}
	slices.Sort(rss)
	err := filepath.WalkDir(a.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			dirBytes += info.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatalf("data dir of %s: %v", a.name, err)
	}
	return rss[len(rss)/2], dirBytes
}
