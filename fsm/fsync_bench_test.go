package fsm

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFsync measures one 4 KiB write + fdatasync on the disk under
// TMPDIR: the physical floor of every durable raft append (a commit needs
// one on the leader and one on a follower, in parallel).
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for b.Loop() {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
}
