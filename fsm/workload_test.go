package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// genLog builds a realistic log of n entries: a reference FSM applies
// each entry as it is generated so later commands can name real attempts
// and tokens. Some commands are deliberately stale or invalid. It returns
// the log and the reference harness (whose state is the log's outcome).
func genLog(t testing.TB, seed uint64, n int) ([]*raft.Log, *harness) {
	t.Helper()
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var logs []*raft.Log
	nextJob := 0
	add := func(l *raft.Log) {
		h.f.Apply(l)
		logs = append(logs, l)
	}
	nodes := []string{"n0", "n1", "n2", "n3"}
	idsIn := func(st JobState, max int) []string {
		var out []string
		_ = h.f.View(func(tx *Tx) error {
			return tx.ForEachJobInState(st, func(j *Job) bool {
				out = append(out, j.ID)
				return len(out) < max
			})
		})
		return out
	}
	live := func() []Attempt {
		var out []Attempt
		_ = h.f.View(func(tx *Tx) error {
			return tx.LiveAttempts(func(a *Attempt) bool { out = append(out, *a); return true })
		})
		return out
	}
	for _, nd := range nodes {
		add(h.entry(CmdUpsertNode, UpsertNode{Node: Node{Name: nd, Labels: map[string]string{"zone": nd}}}))
	}
	add(h.entry(CmdInit, InitCluster{ClusterID: "c1"}))
	for len(logs) < n {
		h.now = h.now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		switch op := rng.IntN(100); {
		case op < 20:
			var p SubmitJobs
			for range 1 + rng.IntN(2) {
				nextJob++
				nj := NewJob{ID: fmt.Sprintf("01W%023d", nextJob), Spec: JobSpec{
					Name: fmt.Sprintf("job-%d", nextJob), Command: []string{"sh", "-c", "x"},
					Labels:      map[string]string{"team": []string{"a", "b", "c"}[rng.IntN(3)], "k": "v"},
					MaxAttempts: rng.IntN(4), Backoff: Backoff{Initial: Duration(time.Second), Multiplier: 1.7},
				}}
				if rng.IntN(3) == 0 {
					nj.IdempotencyKey = fmt.Sprintf("key-%d", rng.IntN(40))
				}
				if rng.IntN(8) == 0 {
					rt := h.now.Add(time.Duration(rng.IntN(60)) * time.Second)
					nj.Spec.RunAt = &rt
				}
				p.Jobs = append(p.Jobs, nj)
			}
			add(h.entry(CmdSubmitJobs, p))
		case op < 42:
			var p Place
			for _, id := range append(idsIn(JobQueued, 3), idsIn(JobRetrying, 1)...) {
				p.Placements = append(p.Placements, Placement{JobID: id, Node: nodes[rng.IntN(len(nodes))], Resources: Resources{CPU: 100}})
			}
			add(h.entry(CmdPlace, p))
		case op < 70:
			la := live()
			if len(la) == 0 {
				continue
			}
			a := la[rng.IntN(len(la))]
			r := ReportAttempt{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken, Node: a.Node, ExitCode: intp(rng.IntN(3))}
			r.State = []AttemptState{AttemptRunning, AttemptRunning, AttemptSucceeded, AttemptFailed, AttemptKilled}[rng.IntN(5)]
			if r.State == AttemptKilled {
				r.Reason = []string{ReasonTimeout, ReasonOOM, ReasonFenced, ReasonCancelled}[rng.IntN(4)]
			}
			if rng.IntN(10) == 0 {
				r.FencingToken-- // a stale report
			}
			r.StderrTail = "boom"
			add(h.entry(CmdReport, r))
		case op < 75:
			if nextJob > 0 {
				add(h.entry(CmdCancelJob, CancelJob{JobID: fmt.Sprintf("01W%023d", 1+rng.IntN(nextJob))}))
			}
		case op < 80:
			la := live()
			if len(la) == 0 {
				continue
			}
			a := la[rng.IntN(len(la))]
			add(h.entry(CmdMarkLost, MarkLost{Node: a.Node, Attempts: []AttemptRef{{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken}}}))
		case op < 86:
			add(h.entry(CmdRelease, ReleaseJobs{JobIDs: append(idsIn(JobRetrying, 5), idsIn(JobWaiting, 5)...)}))
		case op < 89:
			p := SetNodeState{Name: nodes[rng.IntN(len(nodes))]}
			p.Eligibility = []Eligibility{Eligible, Eligible, Draining, Ineligible}[rng.IntN(4)]
			p.Gossip = []GossipState{NodeAlive, NodeAlive, NodeSuspect}[rng.IntN(3)]
			add(h.entry(CmdNodeState, p))
		case op < 91:
			add(h.entry(CmdGC, GC{Before: h.now.Add(-time.Minute), KeysBefore: h.now.Add(-2 * time.Minute)}))
		case op < 94:
			if ids := idsIn(JobFailed, 2); len(ids) > 0 {
				add(h.entry(CmdRetryJob, RetryJob{JobID: ids[0]}))
			}
		case op < 96:
			reasons := map[string]string{}
			for _, id := range idsIn(JobQueued, 4) {
				reasons[id] = fmt.Sprintf("no fit %d", rng.IntN(3))
			}
			add(h.entry(CmdSetReasons, SetReasons{Reasons: reasons}))
		case op < 97:
			add(h.entry(CmdSetQueue, SetQueue{Name: "q", MaxRunning: rng.IntN(3)}))
		case op < 98:
			h.idx++
			add(&raft.Log{Index: h.idx, Term: 1, Type: raft.LogConfiguration, Data: []byte("cfg")})
		default:
			h.idx++
			add(rawEntry(h.idx, []byte("garbage")))
		}
	}
	return logs, h
}

// applyChunked applies logs in batches of random size (1..max).
func applyChunked(f *FSM, logs []*raft.Log, seed uint64, max int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < len(logs); {
		n := min(1+rng.IntN(max), len(logs)-i)
		f.ApplyBatch(logs[i : i+n])
		i += n
	}
}

// TestDeterminism: the same log gives the same state hash no matter how
// it is cut into batches, and re-applying it changes nothing.
func TestDeterminism(t *testing.T) {
	logs, ref := genLog(t, 7, 1500)
	want := ref.hash()
	checkIndexes(t, ref.f)
	tests := []struct {
		name string
		max  int
	}{{"batches of 1", 1}, {"batches up to 7", 7}, {"batches up to 64", 64}, {"one batch", len(logs)}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			applyChunked(h.f, logs, uint64(tc.max), tc.max)
			if got := h.hash(); got != want {
				t.Fatalf("hash %s, want %s", got, want)
			}
			if h.f.AppliedIndex() != logs[len(logs)-1].Index {
				t.Fatalf("applied %d, want %d", h.f.AppliedIndex(), logs[len(logs)-1].Index)
			}
			// Replay (raft re-sends entries after a restart): skipped.
			applyChunked(h.f, logs[len(logs)/2:], 3, 50)
			if got := h.hash(); got != want {
				t.Fatalf("replay changed the state")
			}
			checkIndexes(t, h.f)
		})
	}
}

// memSink is a raft.SnapshotSink over a buffer.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil || sink.cancelled {
		t.Fatalf("persist: %v", err)
	}
	snap.Release()
	return sink.Bytes()
}

// TestSnapshotRestore: a restored FSM has the same hash and applied index
// and continues applying the rest of the log to the same final state.
func TestSnapshotRestore(t *testing.T) {
	logs, ref := genLog(t, 11, 800)
	want := ref.hash()

	mid := newHarness(t)
	applyChunked(mid.f, logs[:400], 5, 20)
	midHash := mid.hash()
	data := snapshotBytes(t, mid.f)
	// Apply keeps working while a snapshot is open.
	snap, err := mid.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	applyChunked(mid.f, logs[400:], 5, 20)
	snap.Release()

	h := newHarness(t)
	applyChunked(h.f, logs[:50], 1, 3) // some state to be replaced
	w, stop := h.f.Watch()
	defer stop()
	sub := h.f.Subscribe(4)
	if err := h.f.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := h.hash(); got != midHash {
		t.Fatalf("restored hash differs")
	}
	if h.f.AppliedIndex() != logs[399].Index {
		t.Fatalf("applied %d after restore, want %d", h.f.AppliedIndex(), logs[399].Index)
	}
	select {
	case <-w:
	default:
		t.Errorf("restore did not signal watchers")
	}
	if e := <-sub.C(); e.Type != EventReset {
		t.Errorf("first event after restore = %+v, want reset", e)
	}
	applyChunked(h.f, logs, 9, 30) // raft replays from the start: old entries skipped
	if got := h.hash(); got != want || mid.hash() != want {
		t.Fatalf("after restore+replay: hash differs from reference")
	}

	// Restore of garbage fails and leaves the state as it was.
	if err := h.f.Restore(nopCloser{bytes.NewReader([]byte("not a snapshot"))}); err == nil {
		t.Fatalf("restore of garbage succeeded")
	}
	if got := h.hash(); got != want {
		t.Fatalf("failed restore changed the state")
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// TestReopen: a clean close and reopen keeps state and applied index.
func TestReopen(t *testing.T) {
	logs, ref := genLog(t, 3, 300)
	want := ref.hash()
	path := ref.f.Path()
	if err := ref.f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, got, err := f.StateHash()
	if err != nil || got != want || f.AppliedIndex() != logs[len(logs)-1].Index {
		t.Fatalf("after reopen: hash equal=%v applied=%d err=%v", got == want, f.AppliedIndex(), err)
	}
}

// TestSnapshotConcurrentWithApply: Persist streams while Apply and View
// continue; the snapshot reflects the index it was taken at.
func TestSnapshotConcurrentWithApply(t *testing.T) {
	logs, ref := genLog(t, 13, 600)
	want := ref.hash()
	h := newHarness(t)
	applyChunked(h.f, logs[:300], 2, 10)
	atIdx, atHash, _ := h.f.StateHash()
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() {
		var sink memSink
		if err := snap.Persist(&sink); err != nil {
			t.Error(err)
		}
		done <- sink.Bytes()
	}()
	applyChunked(h.f, logs[300:], 4, 10)
	data := <-done
	if h.hash() != want {
		t.Fatalf("apply during persist diverged")
	}
	r := newHarness(t)
	if err := r.f.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	idx, got, _ := r.f.StateHash()
	if idx != atIdx || got != atHash {
		t.Fatalf("snapshot taken at %d restored as %d (hash equal %v)", atIdx, idx, got == atHash)
	}
}
