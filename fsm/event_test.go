package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ringEvents reads everything the ring holds from pos.
func ringEvents(t *testing.T, r *EventRing, pos uint64) []Event {
	t.Helper()
	var out []Event
	buf := make([]RingEvent, 0, 64)
	for {
		got, next, ok := r.Read(pos, buf)
		if !ok {
			t.Fatalf("read at %d: position left the ring", pos)
		}
		if len(got) == 0 {
			return out
		}
		for _, e := range got {
			out = append(out, e.Event)
		}
		pos = next
	}
}

// kinds renders events as "kind job/attempt node state" for comparison.
func kinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		s := e.Kind()
		if e.JobID != "" {
			s += fmt.Sprintf(" %s/%d", e.JobID, e.Attempt)
		}
		if e.Node != "" {
			s += " " + e.Node
		}
		out = append(out, s)
	}
	return out
}

// TestEventPerTransition: each transition Apply commits yields its typed
// event, in apply order, with the entry's index and time.
func TestEventPerTransition(t *testing.T) {
	const j1, j2, n1 = "01J1", "01J2", "n1"
	h := newHarness(t)
	pos, _ := h.f.Events().Tail()
	h.addNode(n1)
	h.submit(j1, j2)
	tok := h.place(j1, n1)
	h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: AttemptRunning})
	h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: AttemptFailed, ExitCode: intp(1)})
	h.now = h.now.Add(time.Hour)
	tok = h.place(j1, n1)
	h.must(CmdMarkLost, MarkLost{Node: n1, Attempts: []AttemptRef{{JobID: j1, Attempt: 2, FencingToken: tok}}})
	tok = h.place(j1, n1)
	h.must(CmdCancelJob, CancelJob{JobID: j1, Reason: "user"})
	h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 3, FencingToken: tok, Node: n1, State: AttemptKilled, Reason: ReasonCancelled})
	h.must(CmdFailJobs, FailJobs{JobIDs: []string{j2}, Reason: "deadline"})
	h.must(CmdNodeState, SetNodeState{Name: n1, Eligibility: Draining})
	h.must(CmdNodeState, SetNodeState{Name: n1, Gossip: NodeDead})
	h.must(CmdLeader, LeaderChanged{Node: n1, Term: 7})

	got := ringEvents(t, h.f.Events(), pos)
	want := []string{
		"node.joined n1",
		"job.submitted 01J1/0", "job.submitted 01J2/0",
		"attempt.placed 01J1/1 n1", "job.running 01J1/1",
		"attempt.started 01J1/1 n1",
		"attempt.failed 01J1/1 n1", "job.retrying 01J1/1",
		"attempt.placed 01J1/2 n1", "job.running 01J1/2",
		"attempt.lost 01J1/2 n1", "job.queued 01J1/2",
		"attempt.placed 01J1/3 n1", "job.running 01J1/3",
		"attempt.stop_requested 01J1/3 n1",
		"attempt.killed 01J1/3 n1", "job.cancelled 01J1/3",
		"job.failed 01J2/0",
		"node.draining n1",
		"node.dead n1",
		"leader.changed n1",
	}
	if !slices.Equal(kinds(got), want) {
		t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(kinds(got), "\n  "), strings.Join(want, "\n  "))
	}
	for i := 1; i < len(got); i++ {
		if !got[i-1].ID().Less(got[i].ID()) {
			t.Errorf("event %d (%s) does not follow %s", i, got[i].ID(), got[i-1].ID())
		}
		if got[i].Index == got[i-1].Index && got[i].Seq != got[i-1].Seq+1 {
			t.Errorf("seq within entry %d jumps: %d after %d", got[i].Index, got[i].Seq, got[i-1].Seq)
		}
	}
	if last := got[len(got)-1]; last.Index != h.idx || last.Term != 7 || !last.At.Equal(h.now) {
		t.Errorf("leader event = %+v, want index %d term 7 at %v", last, h.idx, h.now)
	}

	// The timeline holds the job's events, the same as the stream's.
	var tl []Event
	if err := h.f.View(func(tx *Tx) (err error) { tl, err = tx.JobEvents(j1); return err }); err != nil {
		t.Fatal(err)
	}
	var stream []Event
	for _, e := range got {
		if e.JobID == j1 {
			e.wait = 0
			stream = append(stream, e)
		}
	}
	if !slices.EqualFunc(tl, stream, func(a, b Event) bool {
		return a.ID() == b.ID() && a.Kind() == b.Kind() && a.At.Equal(b.At) && a.Node == b.Node && a.Reason == b.Reason
	}) {
		t.Errorf("timeline:\n  %v\nwant the stream's:\n  %v", kinds(tl), kinds(stream))
	}
}

// TestEventsDeterministic: two replicas applying the same log derive the
// same events, and the JSON round-trips.
func TestEventsDeterministic(t *testing.T) {
	logs, ref := genLog(t, 11, 600)
	other := newHarness(t)
	for i := 0; i < len(logs); i += 7 { // other batch boundaries
		end := min(i+7, len(logs))
		other.f.ApplyBatch(logs[i:end])
	}
	a, b := ringEvents(t, ref.f.Events(), 0), ringEvents(t, other.f.Events(), 0)
	if len(a) < 600 {
		t.Fatalf("only %d events", len(a))
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("replicas derived different events (%d vs %d)", len(a), len(b))
	}
	var back []Event
	if err := json.Unmarshal(ja, &back); err != nil {
		t.Fatal(err)
	}
	if jc, _ := json.Marshal(back); string(jc) != string(ja) {
		t.Errorf("JSON does not round-trip")
	}
}

func TestEventRingSeekAndLag(t *testing.T) {
	r := newEventRing(4, 10)
	ev := func(idx uint64, seq int) Event {
		return Event{Index: idx, Seq: seq, Type: EventJob, Name: NameSubmitted}
	}
	r.append([]Event{ev(11, 0), ev(11, 1), ev(12, 0)})
	for _, c := range []struct {
		after   string
		pos     uint64
		ok      bool
		comment string
	}{
		{"10", 0, true, "the floor: everything after it is held"},
		{"9", 0, false, "before the floor: may have missed events"},
		{"11-0", 1, true, "mid-entry"},
		{"11", 2, true, "whole entry"},
		{"12-0", 3, true, "up to date"},
		{"99", 3, true, "ahead of this node: waits"},
	} {
		id, err := ParseEventID(c.after)
		if err != nil {
			t.Fatal(err)
		}
		pos, ok := r.Seek(id)
		if pos != c.pos || ok != c.ok {
			t.Errorf("Seek(%s) = %d, %v; want %d, %v (%s)", c.after, pos, ok, c.pos, c.ok, c.comment)
		}
	}
	changed := r.Changed()
	r.append([]Event{ev(13, 0), ev(14, 0)}) // overflows: 11-0 leaves
	select {
	case <-changed:
	default:
		t.Errorf("append did not signal Changed")
	}
	if _, _, ok := r.Read(0, make([]RingEvent, 0, 8)); ok {
		t.Errorf("read of an evicted position succeeded")
	}
	if _, ok := r.Seek(EventID{Index: 10, Seq: SeqAll}); ok {
		t.Errorf("seek before the evicted event succeeded")
	}
	if pos, ok := r.Seek(EventID{Index: 11, Seq: 0}); !ok || pos != 1 {
		t.Errorf("seek right after the evicted event = %d, %v", pos, ok)
	}
	got, next, ok := r.Read(3, make([]RingEvent, 0, 8))
	if !ok || next != 5 || len(got) != 2 || got[0].Index != 13 || !strings.Contains(string(got[1].JSON), `"id":"14-0"`) {
		t.Errorf("Read(3) = %+v, %d, %v", got, next, ok)
	}
	// A restore: every reader, even an up-to-date one, must start over.
	r.reset(20)
	if _, _, ok := r.Read(5, make([]RingEvent, 0, 8)); ok {
		t.Errorf("up-to-date reader read on after a reset")
	}
	if pos, last := r.Tail(); last.String() != "20" || pos != 6 {
		t.Errorf("Tail after reset = %d, %s", pos, last)
	}
}

// TestTimelineGCAndRestore: a job's timeline goes with the job when GC
// drops it, and a snapshot carries it.
func TestTimelineGCAndRestore(t *testing.T) {
	const j1, j2, n1 = "01J1", "01J2", "n1"
	h := newHarness(t)
	h.addNode(n1)
	h.submit(j1)
	h.must(CmdCancelJob, CancelJob{JobID: j1})
	h.now = h.now.Add(time.Hour)
	h.submit(j2)
	timeline := func(f *FSM, id string) []Event {
		var tl []Event
		if err := f.View(func(tx *Tx) (err error) { tl, err = tx.JobEvents(id); return err }); err != nil {
			t.Fatal(err)
		}
		return tl
	}
	if n := len(timeline(h.f, j1)); n != 2 {
		t.Fatalf("timeline of %s has %d events, want 2", j1, n)
	}
	// Snapshot and restore into a fresh FSM.
	data := snapshotBytes(t, h.f)
	other, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if got := kinds(timeline(other, j1)); !slices.Equal(got, []string{"job.submitted 01J1/0", "job.cancelled 01J1/0"}) {
		t.Errorf("restored timeline = %v", got)
	}
	h.must(CmdGC, GC{Before: t0.Add(time.Minute), KeysBefore: t0.Add(time.Minute)})
	if tl := timeline(h.f, j1); len(tl) != 0 {
		t.Errorf("GC left the timeline of %s: %v", j1, kinds(tl))
	}
	if n := len(timeline(h.f, j2)); n != 1 {
		t.Errorf("GC touched %s's timeline: %d events", j2, n)
	}
	checkIndexes(t, h.f)
}
