package fsm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// mappedRSS is the resident size in KiB of this process's mappings of path.
func mappedRSS(t *testing.T, path string) int {
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

// ReleaseMapped drops the pages a full scan mapped, and reads afterwards
// still see the same state.
func TestReleaseMapped(t *testing.T) {
	if runtime.GOOS != "linux" {
		if os.Getenv("CI") == "true" {
			t.Fatal("ReleaseMapped needs Linux (/proc/self/smaps, madvise)")
		}
		t.Skip("SKIPPED LOUDLY: ReleaseMapped is Linux-only")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := Open(path, Options{NoSync: true, ReleaseInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for idx := uint64(1); idx <= 20; idx++ {
		p := SubmitJobs{Jobs: make([]NewJob, 500)}
		for j := range p.Jobs {
			p.Jobs[j] = NewJob{ID: fmt.Sprintf("01B%011d%012d", idx, j),
				Spec: JobSpec{Name: "release", Command: []string{"true"}, Priority: 50}}
		}
		if r := f.Apply(rawEntry(idx, encodeCmd(t, CmdSubmitJobs, t0, p))).(*Result); r.Err != nil {
			t.Fatalf("entry %d: %v", idx, r.Err)
		}
	}
	_, before, err := f.StateHash() // reads every page of the tree
	if err != nil {
		t.Fatal(err)
	}
	scanned := mappedRSS(t, path)
	if scanned < 1024 {
		t.Fatalf("a full scan left %d KiB of the state file mapped; want >= 1 MiB (10,000 jobs)", scanned)
	}
	if err := f.ReleaseMapped(); err != nil {
		t.Fatal(err)
	}
	if left := mappedRSS(t, path); left > scanned/10 {
		t.Fatalf("after ReleaseMapped %d KiB of %d stay mapped", left, scanned)
	}
	_, after, err := f.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("state hash changed across ReleaseMapped: %s then %s", before, after)
	}
}
