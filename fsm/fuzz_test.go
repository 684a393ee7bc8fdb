package fsm

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Fuzz targets of the state machine's inputs (docs/security.md, "Fuzzing").
// Their seeds run in every plain `go test`; `make fuzz` (scripts/fuzz.sh)
// fuzzes each for longer. A crash the fuzzer finds is kept under
// testdata/fuzz/<FuzzName>/ and replays as a seed from then on.

// fuzzState builds the state every FuzzApply input lands on: two nodes, a
// running attempt, a queued and a waiting job, a queue, a schedule with a
// fire and a workflow, so that most handlers reach past their not-found
// checks. It returns the running attempt's fencing token.
func fuzzState(h *harness) uint64 {
	h.addNode("n1")
	h.addNode("n2")
	h.must(CmdInit, InitCluster{ClusterID: "c1"})
	h.must(CmdSetQueue, SetQueue{Name: "q", MaxRunning: 1})
	h.submit(jobID(1), jobID(2))
	run := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: jobID(3), IdempotencyKey: "k3",
		Spec: JobSpec{Command: []string{"true"}, Queue: "q", RunAt: &run}}}})
	tok := h.place(jobID(1), "n1")
	h.must(CmdReport, ReportAttempt{JobID: jobID(1), Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptRunning, StartedAt: t0})
	h.must(CmdPutSchedule, PutSchedule{Create: true, Schedule: ScheduleSpec{Name: "s1", Cron: "@every 1m",
		Job: JobSpec{Command: []string{"true"}}, Overlap: OverlapAllow, CatchUp: CatchUpLatest, MaxCatchUp: 10}})
	h.must(CmdFireSchedules, FireSchedules{Fires: []Fire{{Schedule: "s1", Tick: t0, JobID: jobID(4)}}})
	h.must(CmdSubmitWorkflow, SubmitWorkflow{ID: "01WF", Name: "wf", Jobs: []NewJob{
		{ID: jobID(5), Spec: JobSpec{Name: "a", Command: []string{"true"}}},
		{ID: jobID(6), Spec: JobSpec{Name: "b", Command: []string{"true"}, DependsOn: []string{jobID(5)}}},
	}})
	return tok
}

// fuzzSeeds returns encoded entries of every command type: one that makes
// sense against fuzzState and one with every field filled at random.
func fuzzSeeds(tb testing.TB, tok uint64) [][]byte {
	exit := 1
	later := t0.Add(time.Hour)
	sensible := []struct {
		t CommandType
		p any
	}{
		{CmdInit, InitCluster{ClusterID: "c2"}},
		{CmdLeader, LeaderChanged{Node: "n2", Term: 7}},
		{CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: jobID(9), Spec: JobSpec{Command: []string{"x"}, Constraints: []string{"zone == a"},
			DependsOn: []string{jobID(1)}, Condition: "always"}}}}},
		{CmdSubmitGroup, SubmitGroup{Submits: []SubmitJobs{{Jobs: []NewJob{{ID: jobID(10), IdempotencyKey: "k3", Spec: JobSpec{Command: []string{"x"}}}}},
			{Jobs: []NewJob{{ID: jobID(1), Spec: JobSpec{Command: []string{"x"}}}}}}}},
		{CmdUpsertNode, UpsertNode{Node: Node{Name: "n3", Capacity: Resources{CPU: 1000, MemoryMB: 10}, Slots: 1}}},
		{CmdNodeState, SetNodeState{Name: "n1", Gossip: NodeDead, Eligibility: Draining, DrainDeadline: later}},
		{CmdPlace, Place{Placements: []Placement{{JobID: jobID(2), Node: "n2"}, {JobID: jobID(2), Node: "n1"}}}},
		{CmdReport, ReportAttempt{JobID: jobID(1), Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptFailed,
			ExitCode: &exit, FinishedAt: later, StderrTail: "boom", Result: []byte("r")}},
		{CmdReportBatch, ReportAttempts{Reports: []ReportAttempt{{JobID: jobID(1), Attempt: 1, FencingToken: tok, Node: "n1",
			State: AttemptSucceeded, FinishedAt: later}, {JobID: jobID(1), Attempt: 1, FencingToken: tok + 1, State: AttemptLost}}}},
		{CmdRelease, ReleaseJobs{JobIDs: []string{jobID(3), jobID(6)}}},
		{CmdCancelJob, CancelJob{JobID: jobID(5), Reason: "x"}},
		{CmdRetryJob, RetryJob{JobID: jobID(1)}},
		{CmdMarkLost, MarkLost{Node: "n1", Attempts: []AttemptRef{{JobID: jobID(1), Attempt: 1, FencingToken: tok}}}},
		{CmdFailJobs, FailJobs{JobIDs: []string{jobID(2), jobID(404)}, Reason: "deadline"}},
		{CmdSetReasons, SetReasons{Reasons: map[string]string{jobID(2): "no node fits", "": "x"}}},
		{CmdSetQueue, SetQueue{Name: "q", MaxRunning: -1}},
		{CmdStopAttempts, StopAttempts{Attempts: []AttemptRef{{JobID: jobID(1), Attempt: 1, FencingToken: tok}}, Reason: "preempted"}},
		{CmdGC, GC{Before: later, KeysBefore: later}},
		{CmdPutSchedule, PutSchedule{Schedule: ScheduleSpec{Name: "s1", Cron: "0 0 30 2 *", TimeZone: "Europe/Berlin",
			Job: JobSpec{Command: []string{"y"}}, Overlap: OverlapForbid, CatchUp: CatchUpAll, MaxCatchUp: 3}}},
		{CmdDeleteSchedule, DeleteSchedule{Name: "s1"}},
		{CmdPauseSchedule, PauseSchedule{Name: "s1", Paused: true}},
		{CmdFireSchedules, FireSchedules{Fires: []Fire{{Schedule: "s1", Tick: later, Skip: "overlap", Count: 3},
			{Schedule: "s1", Tick: t0, JobID: jobID(11)}}}},
		{CmdSubmitWorkflow, SubmitWorkflow{ID: "01WF2", Name: "wf2", IdempotencyKey: "w", Jobs: []NewJob{
			{ID: jobID(12), Spec: JobSpec{Name: "a", Command: []string{"x"}, DependsOn: []string{jobID(13)}}},
			{ID: jobID(13), Spec: JobSpec{Name: "b", Command: []string{"x"}, DependsOn: []string{jobID(12)}}}}}},
		{CmdCancelWorkflow, CancelWorkflow{ID: "01WF"}},
		{CmdRetryWorkflow, RetryWorkflow{ID: "01WF"}},
		{CmdDeliveries, DeliveryOutcomes{Outcomes: []DeliveryOutcome{{ID: "d1", Attempt: 1, Delivered: true}}}},
	}
	var out [][]byte
	for _, s := range sensible {
		out = append(out, encodeCmd(tb, s.t, t0.Add(time.Minute), s.p))
	}
	fl := &filler{rnd: rand.New(rand.NewPCG(16, 16))}
	for ct, p := range payloadTypes {
		v := reflect.New(reflect.TypeOf(p))
		fl.fill(v.Elem(), string(ct))
		out = append(out, encodeCmd(tb, ct, t0, v.Elem().Interface()))
	}
	// Version 1 (JSON) entries are still applied.
	v1, _ := json.Marshal(map[string]any{"v": 1, "t": CmdCancelJob, "at": t0, "p": CancelJob{JobID: jobID(2)}})
	out = append(out, v1, []byte(`{"v":1,"t":"gc","at":"2025-01-01T00:00:00Z","p":{}}`),
		[]byte(`{"v":1,"t":"place","at":"2025-01-01T00:00:00Z","p":{"placements":[{"job_id":"`+jobID(2)+`","node":"n2","resources":{"cpu":-5}}]}}`))
	return out
}

// FuzzApply: no raft entry, however corrupt or hostile, makes Apply panic
// (a panic in Apply stops every replica at the same index). A refused entry
// changes nothing but the applied index; an applied one changes the state
// the same way on every node and keeps the indexes consistent; replaying it
// at the next index is also safe.
func FuzzApply(f *testing.F) {
	// The state is built once and copied for every input: opening a copy
	// is much cheaper than applying the commands again.
	dir := f.TempDir()
	seedH := &harness{t: f, f: openFuzzFSM(f, filepath.Join(dir, "state.db"), nil), now: t0}
	tok := fuzzState(seedH)
	for _, s := range fuzzSeeds(f, tok) {
		f.Add(s)
	}
	idx := seedH.idx + 1
	if err := seedH.f.Close(); err != nil {
		f.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(dir, "state.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		a := openFuzzFSM(t, filepath.Join(dir, "a.db"), state)
		b := openFuzzFSM(t, filepath.Join(dir, "b.db"), state)
		r := applyRaw(t, a, idx, data)
		if r.Err == nil {
			applyRaw(t, b, idx, data)
		} else {
			if !isRefusal(r.Err) {
				t.Fatalf("refusal %v wraps no refusal sentinel", r.Err)
			}
			if r.Jobs != nil || r.Submits != nil || r.Workflow != "" {
				t.Fatalf("refused entry reports results: %+v", r)
			}
			// A configuration entry only advances the index: the state
			// the refused entry must have left.
			b.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogNoop})
		}
		ha, hb := fuzzHash(t, a), fuzzHash(t, b)
		if ha != hb {
			t.Fatalf("state differs from the reference (err=%v): %s vs %s", r.Err, ha, hb)
		}
		checkIndexes(t, a)
		applyRaw(t, a, idx+1, data) // the same command again, later in the log
		checkIndexes(t, a)
		// The node still applies ordinary commands afterwards.
		h := &harness{t: t, f: a, idx: idx + 1, now: t0}
		h.addNode("after")
	})
}

// openFuzzFSM opens a small FSM at path, first writing state there if given.
func openFuzzFSM(tb testing.TB, path string, state []byte) *FSM {
	tb.Helper()
	if state != nil {
		if err := os.WriteFile(path, state, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	f, err := Open(path, Options{NoSync: true, InitialMmapSize: 4 << 20, EventBuffer: 16, ReleaseInterval: -1})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

func fuzzHash(t *testing.T, f *FSM) string {
	t.Helper()
	_, s, err := f.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func applyRaw(t *testing.T, f *FSM, idx uint64, data []byte) *Result {
	t.Helper()
	r, ok := f.Apply(rawEntry(idx, data)).(*Result)
	if !ok {
		t.Fatalf("Apply returned %T", r)
	}
	if r.Index != idx {
		t.Fatalf("result index %d, want %d", r.Index, idx)
	}
	return r
}

// FuzzParseCron: the cron wrapper refuses bad specs and zones with a
// *CronError and never panics; a parsed spec's Next terminates, moves
// forward, and is stable (asking again from the tick before gives it back).
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/5 * * * *", "0 0 30 2 *", "30 2 * * *", "0 0 * * 0", "0 */2 * * 1-5",
		"15 10 * * ? ", "0 0 1 1 *", "5 4 * * sun", "0 30 1 * * *", "@hourly", "@daily", "@weekly", "@monthly", "@yearly",
		"@annually", "@midnight", "@every 30s", "@every 1h30m", "@every 500ms", "@every -1s", "@every 9999999h", "@every",
		"TZ=UTC * * * * *", "CRON_TZ=Europe/Berlin 0 0 * * *", "", "*", "60 * * * *", "* * * * * * *", "1-0 * * * *",
		"*/0 * * * *", "0-59/100 * * * *", "L * * * *", "0 0 L * *", "0 0 * * 7", "? ? ? ? ?", "a-b * * * *", "1,2,,3 * * * *"} {
		for _, z := range []string{"", "UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Local", "Nowhere/X", "../../etc/passwd"} {
			f.Add(s, z, int64(1_700_000_000))
		}
	}
	f.Fuzz(func(t *testing.T, spec, zone string, after int64) {
		c, err := ParseCron(spec, zone)
		if err != nil {
			var ce *CronError
			if !errors.As(err, &ce) || (ce.Field != "cron" && ce.Field != "time_zone") || ce.Reason == "" {
				t.Fatalf("error %v (%T) is not a *CronError naming a field", err, err)
			}
			return
		}
		// Times in years 1970..2500: far enough for any schedule.
		at := time.Unix(int64(uint64(after)%16_725_225_600), 0).UTC()
		anchor := at.Add(-time.Hour)
		n := c.Next(at, anchor)
		if n.IsZero() {
			return
		}
		if !n.After(at) {
			t.Fatalf("Next(%s) = %s, not after", at, n)
		}
		if again := c.Next(n.Add(-time.Nanosecond), anchor); !again.Equal(n) {
			t.Fatalf("Next(%s) = %s, but Next(just before it) = %s", at, n, again)
		}
	})
}

// FuzzParseConstraint: constraints parse or fail with ErrBadConstraint, and
// a parsed one prints as text that parses back to itself.
func FuzzParseConstraint(f *testing.F) {
	for _, s := range []string{"zone == a", "zone==a", "arch != arm", "gpu in (a100,h100)", "gpu in a100, h100",
		"arch not_in (arm)", "arch not in (arm, x)", "has gpu_model", "not_has spot", "", "   ", "==", "a ==", "== b",
		"zone = a", "zone in ()", "zone in (a,,b)", "zone in (a b)", "has", "has a b", "not_has", "a not x", "a not",
		"k in ((a))", "k.x/y == v-1.2", "kéy == v", "k == \x00", "k\tin\t(a)", "a == b == c", "a != b == c", "in in (in)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConstraint(s)
		if err != nil {
			if !errors.Is(err, ErrBadConstraint) {
				t.Fatalf("%q: error %v does not wrap ErrBadConstraint", s, err)
			}
			return
		}
		back, err := ParseConstraint(c.String())
		if err != nil {
			t.Fatalf("%q parsed to %+v, whose text %q does not parse: %v", s, c, c.String(), err)
		}
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("%q parsed to %+v; its text %q parses to %+v", s, c, c.String(), back)
		}
		labels := map[string]string{c.Key: strings.Join(c.Values, "")}
		_ = c.Match(labels)
		_ = c.Match(nil)
	})
}
