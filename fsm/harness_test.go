package fsm

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// t0 is the fixed "now" tests start from.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// harness applies commands to a real FSM on a real bbolt file.
type harness struct {
	t   testing.TB
	f   *FSM
	idx uint64
	now time.Time
	// log, when recording, collects every entry apply applies (to apply
	// them again elsewhere, in other batches).
	recording bool
	log       []*raft.Log
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	f, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return &harness{t: t, f: f, now: t0}
}

// entry builds the next raft log entry for a command.
func (h *harness) entry(typ CommandType, payload any) *raft.Log {
	h.t.Helper()
	h.idx++
	return &raft.Log{Index: h.idx, Term: 1, Type: raft.LogCommand, Data: encodeCmd(h.t, typ, h.now, payload)}
}

func encodeCmd(t testing.TB, typ CommandType, at time.Time, payload any) []byte {
	t.Helper()
	c, err := NewCommand(typ, at, payload)
	if err != nil {
		t.Fatalf("command: %v", err)
	}
	b, err := c.Encode()
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return b
}

// apply applies one command and returns its result.
func (h *harness) apply(typ CommandType, payload any) *Result {
	h.t.Helper()
	l := h.entry(typ, payload)
	if h.recording {
		h.log = append(h.log, l)
	}
	r, ok := h.f.Apply(l).(*Result)
	if !ok {
		h.t.Fatalf("Apply returned %T", r)
	}
	return r
}

// must applies a command that has to succeed.
func (h *harness) must(typ CommandType, payload any) *Result {
	h.t.Helper()
	r := h.apply(typ, payload)
	if r.Err != nil {
		h.t.Fatalf("%s: %v", typ, r.Err)
	}
	return r
}

func (h *harness) job(id string) *Job {
	h.t.Helper()
	var j *Job
	if err := h.f.View(func(tx *Tx) (err error) { j, err = tx.Job(id); return err }); err != nil {
		h.t.Fatalf("job %s: %v", id, err)
	}
	return j
}

func (h *harness) attempt(id string, n int) *Attempt {
	h.t.Helper()
	var a *Attempt
	if err := h.f.View(func(tx *Tx) (err error) { a, err = tx.Attempt(id, n); return err }); err != nil {
		h.t.Fatalf("attempt %s/%d: %v", id, n, err)
	}
	return a
}

func (h *harness) hash() string {
	h.t.Helper()
	_, s, err := h.f.StateHash()
	if err != nil {
		h.t.Fatalf("hash: %v", err)
	}
	return s
}

// addNode registers an alive, eligible node.
func (h *harness) addNode(name string) {
	h.t.Helper()
	h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: name, Capacity: Resources{CPU: 4000, MemoryMB: 8192}}})
}

// submit creates queued jobs with the given IDs.
func (h *harness) submit(ids ...string) {
	h.t.Helper()
	var p SubmitJobs
	for _, id := range ids {
		p.Jobs = append(p.Jobs, NewJob{ID: id, Spec: JobSpec{Command: []string{"true"}}})
	}
	h.must(CmdSubmitJobs, p)
}

// place places a job and returns its attempt's token.
func (h *harness) place(id, node string) uint64 {
	h.t.Helper()
	r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: id, Node: node}}})
	if len(r.Skipped) > 0 {
		h.t.Fatalf("place %s: skipped %v", id, r.Skipped)
	}
	return r.Index
}

func jobID(i int) string { return fmt.Sprintf("01JOB%021d", i) }

// checkIndexes verifies jobs_by_state and live_attempts_by_node agree with
// the records: the property every transition must keep.
func checkIndexes(t testing.TB, f *FSM) {
	t.Helper()
	err := f.View(func(tx *Tx) error {
		jobs := map[string]JobState{}
		if err := tx.tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			var j Job
			if err := decode(v, &j); err != nil {
				return err
			}
			jobs[string(k)] = j.State
			return nil
		}); err != nil {
			return err
		}
		n := 0
		if err := tx.tx.Bucket(bucketJobsByState).ForEach(func(k, _ []byte) error {
			n++
			st, id, _ := strings.Cut(string(k), "/")
			if jobs[id] != JobState(st) {
				return fmt.Errorf("stray index entry %q", k)
			}
			return nil
		}); err != nil {
			return err
		}
		if n != len(jobs) {
			return fmt.Errorf("%d index entries for %d jobs", n, len(jobs))
		}
		live := 0
		if err := tx.tx.Bucket(bucketAttempts).ForEach(func(k, v []byte) error {
			var a Attempt
			if err := decode(v, &a); err != nil {
				return err
			}
			has := tx.tx.Bucket(bucketLiveByNode).Get(liveKey(a.Node, a.JobID, a.Num)) != nil
			if has != a.State.Live() {
				return fmt.Errorf("attempt %s is %s but live index has=%v", k, a.State, has)
			}
			if has {
				live++
			}
			return nil
		}); err != nil {
			return err
		}
		if got := tx.tx.Bucket(bucketLiveByNode).Stats().KeyN; got != live {
			return fmt.Errorf("live index has %d entries, want %d", got, live)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("indexes inconsistent: %v", err)
	}
	checkSchedIndexes(t, f)
}

type raftLog = raft.Log

func rawEntry(idx uint64, data []byte) *raft.Log {
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
}

// checkViewsWhileWriting runs write while three readers open views
// without pause and check each one: check returns what is wrong with the
// view ("" if nothing). It fails the test for any wrong view or error, and
// returns how many views were checked.
func checkViewsWhileWriting(t *testing.T, f *FSM, check func(tx *Tx) (string, error), write func()) int64 {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var views, wrong atomic.Int64
	var firstWrong atomic.Value
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var bad string
				err := f.View(func(tx *Tx) (err error) { bad, err = check(tx); return err })
				views.Add(1)
				if err != nil {
					bad = err.Error()
				}
				if bad != "" {
					wrong.Add(1)
					firstWrong.CompareAndSwap(nil, bad)
				}
			}
		}()
	}
	write()
	close(stop)
	wg.Wait()
	if n := wrong.Load(); n > 0 {
		t.Fatalf("%d of %d views read other records than their transaction holds; first: %v", n, views.Load(), firstWrong.Load())
	}
	return views.Load()
}
