package fsm

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

const (
	crashEnv      = "FOREMAN_FSM_CRASH_PATH"
	crashJobs     = 10 // jobs per command entry
	crashConfigAt = 5  // every 5th index is a configuration entry
)

// crashEntry is entry idx of the crash workload; the parent recomputes
// how many jobs indexes 1..n must have created.
func crashEntry(t testing.TB, idx uint64) *raft.Log {
	if idx%crashConfigAt == 0 {
		return &raft.Log{Index: idx, Type: raft.LogConfiguration, Data: []byte("cfg")}
	}
	var p SubmitJobs
	for i := range crashJobs {
		p.Jobs = append(p.Jobs, NewJob{ID: fmt.Sprintf("01K%012d%08d", idx, i), Spec: JobSpec{Command: []string{"x"}},
			IdempotencyKey: fmt.Sprintf("k-%d-%d", idx, i)})
	}
	return rawEntry(idx, encodeCmd(t, CmdSubmitJobs, t0, p))
}

func crashExpectedJobs(applied uint64) int {
	return int(applied-applied/crashConfigAt) * crashJobs
}

// TestCrashHelper is the child process of TestKill9: it applies batches
// forever (restarting a little before its applied index, as raft replays).
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper process for TestKill9")
	}
	f, err := Open(path, Options{NoSync: true})
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(2)
	}
	idx := max(f.AppliedIndex(), 20) - 19
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for i := 0; ; i++ {
		n := 1 + rng.IntN(8)
		batch := make([]*raft.Log, n)
		for j := range batch {
			batch[j] = crashEntry(t, idx)
			idx++
		}
		f.ApplyBatch(batch)
		if i == 10 {
			fmt.Println("ready")
		}
	}
}

// TestKill9 SIGKILLs a process in the middle of applying batches, then
// checks the file opens, passes bbolt's check and that its applied index
// matches the data exactly (a batch is all or nothing).
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if line := sc.Text(); strings.Contains(line, "ready") || strings.Contains(line, "failed") {
					ready <- line
					return
				}
			}
			ready <- "child exited"
		}()
		select {
		case line := <-ready:
			if line != "ready" {
				_ = cmd.Process.Kill()
				t.Fatalf("round %d: child: %s", round, line)
			}
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("round %d: child never became ready", round)
		}
		// The fault: kill at a random moment while it applies.
		<-time.After(time.Duration(rng.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()

		f, err := Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatalf("round %d: reopen after kill -9: %v", round, err)
		}
		applied := f.AppliedIndex()
		var jobs, keys int
		err = f.View(func(tx *Tx) error {
			jobs = tx.CountJobsInState(JobQueued)
			keys = tx.tx.Bucket(bucketIdempotency).Stats().KeyN
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := crashExpectedJobs(applied); jobs != want || keys != want {
			t.Fatalf("round %d: applied index %d implies %d jobs, file has %d jobs and %d keys", round, applied, want, jobs, keys)
		}
		checkIndexes(t, f)
		t.Logf("round %d: applied index %d, %d jobs", round, applied, jobs)
		// Leave it unclean again for the next round's child.
		f.mu.Lock()
		f.closed = true
		_ = f.db.Close()
		f.mu.Unlock()
	}
}
