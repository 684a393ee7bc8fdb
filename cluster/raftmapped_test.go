package cluster

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// mappedKiB is the resident size of this process's mappings of path.
func mappedKiB(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			in = len(fields) >= 6 && fields[5] == path
		case in && fields[0] == "Rss:":
			kb, _ := strconv.Atoi(fields[1])
			total += kb
		}
	}
	return total
}

func openTestRaftBolt(t *testing.T) *raftBolt {
	t.Helper()
	if runtime.GOOS != "linux" {
		if os.Getenv("CI") == "true" {
			t.Fatal("releasing raft.db's pages needs Linux (/proc/self/maps, madvise)")
		}
		t.Skip("SKIPPED LOUDLY: releasing mapped pages is Linux-only")
	}
	path := filepath.Join(t.TempDir(), raftFile)
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b := &raftBolt{BoltStore: store, path: path}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func bigEntry(idx uint64) *raft.Log {
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(idx)}, 100<<10)}
}

func TestRaftBoltReleaseMapped(t *testing.T) {
	b := openTestRaftBolt(t)
	for i := uint64(1); i <= 40; i++ {
		if err := b.StoreLog(bigEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	var l raft.Log
	for i := uint64(1); i <= 40; i++ { // maps every entry's pages
		if err := b.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
	}
	read := mappedKiB(t, b.path)
	if read < 2048 {
		t.Fatalf("reading 4 MB of entries left %d KiB of raft.db mapped; want >= 2 MiB", read)
	}
	if err := b.releaseMapped(); err != nil {
		t.Fatal(err)
	}
	if left := mappedKiB(t, b.path); left > read/10 {
		t.Fatalf("after releaseMapped %d KiB of %d stay mapped", left, read)
	}
	for i := uint64(1); i <= 40; i++ {
		if err := b.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, bigEntry(i).Data) {
			t.Fatalf("entry %d after release: %v", i, err)
		}
	}
}

// Releases racing with appends that grow (remap) the file never lose or
// corrupt an entry.
func TestRaftBoltReleaseDuringWrites(t *testing.T) {
	b := openTestRaftBolt(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := b.releaseMapped(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const n = 300 // 30 MB: bbolt remaps several times
	for i := uint64(1); i <= n; i++ {
		if err := b.StoreLogs([]*raft.Log{bigEntry(i)}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	var l raft.Log
	for i := uint64(1); i <= n; i++ {
		if err := b.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, bigEntry(i).Data) {
			t.Fatalf("entry %d after concurrent releases: %v", i, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
