package fsm

import (
	"encoding/json"
	"errors"
	"math"
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

// fuzzCmd is a command type and its payload.
type fuzzCmd struct {
	t CommandType
	p any
}

// sensibleCommands are commands of every type that make sense against
// fuzzState (tok is its running attempt's fencing token).
func sensibleCommands(tok uint64) []fuzzCmd {
	exit := 1
	later := t0.Add(time.Hour)
	return []fuzzCmd{
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
		{CmdSetNamespace, SetNamespace{Namespace: Namespace{Name: "team", MaxRunning: 2, MaxCPU: 1000, MaxMemoryMB: 512, Drivers: []string{"process"}, AllowRoot: true}}},
		{CmdDeleteNamespace, DeleteNamespace{Name: "team"}},
	}
}

// fuzzSeeds returns encoded entries of every command type: one that makes
// sense against fuzzState and one with every field filled at random.
func fuzzSeeds(tb testing.TB, tok uint64) [][]byte {
	var out [][]byte
	for _, s := range sensibleCommands(tok) {
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
	base, tok := fuzzStateFile(f)
	for _, s := range fuzzSeeds(f, tok) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkEntry(t, base, data)
	})
}

// FuzzApplyFields: the same properties as FuzzApply, for well-formed
// entries whose fields are hostile. Byte-level mutation rarely gets past
// the CBOR decoder with an ID that exists; here the fuzzer picks a
// sensible command and a seed, and every field of the payload is, with
// some probability, replaced by an extreme value: empty, negative,
// huge, an ID of another kind, a duplicate, a far-away time.
func FuzzApplyFields(f *testing.F) {
	base, tok := fuzzStateFile(f)
	cmds := sensibleCommands(tok)
	for i := range cmds {
		for seed := range uint64(4) {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, seed uint64) {
		c := cmds[int(which)%len(cmds)]
		v := reflect.New(reflect.TypeOf(c.p)).Elem()
		v.Set(reflect.ValueOf(c.p))
		v = deepCopy(v)
		mutate(rand.New(rand.NewPCG(seed, uint64(which))), v, tok)
		cmd, err := NewCommand(c.t, t0.Add(time.Minute), v.Interface())
		if err != nil {
			t.Skip(err)
		}
		data, err := cmd.Encode()
		if err != nil {
			t.Skip(err)
		}
		checkEntry(t, base, data)
	})
}

// fuzzStateFile builds fuzzState once and returns the bytes of its state
// file (every input starts from a copy: much cheaper than applying the
// commands again), the next log index and the fencing token.
func fuzzStateFile(f *testing.F) (*fuzzBase, uint64) {
	dir := f.TempDir()
	h := &harness{t: f, f: openFuzzFSM(f, filepath.Join(dir, "state.db"), nil), now: t0}
	tok := fuzzState(h)
	if err := h.f.Close(); err != nil {
		f.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(dir, "state.db"))
	if err != nil {
		f.Fatal(err)
	}
	base := &fuzzBase{state: state, idx: h.idx + 1}
	// The state every refused entry must leave: a configuration entry at
	// the same index only advances the applied index.
	ref := openFuzzFSM(f, filepath.Join(dir, "ref.db"), state)
	ref.Apply(&raft.Log{Index: base.idx, Term: 1, Type: raft.LogNoop})
	if _, base.refusedHash, err = ref.StateHash(); err != nil {
		f.Fatal(err)
	}
	return base, tok
}

// fuzzBase is the state FuzzApply's inputs are applied to.
type fuzzBase struct {
	state       []byte // the state file
	idx         uint64 // the index the input is applied at
	refusedHash string // the state hash after a refused entry
}

// checkEntry applies data to a copy of the base state and checks what
// FuzzApply promises.
func checkEntry(t *testing.T, base *fuzzBase, data []byte) {
	dir := t.TempDir()
	idx := base.idx
	a := openFuzzFSM(t, filepath.Join(dir, "a.db"), base.state)
	r := applyRaw(t, a, idx, data)
	want := base.refusedHash
	if r.Err == nil {
		// Determinism: a second node applying the same entry.
		b := openFuzzFSM(t, filepath.Join(dir, "b.db"), base.state)
		applyRaw(t, b, idx, data)
		want = fuzzHash(t, b)
	} else {
		if !isRefusal(r.Err) {
			t.Fatalf("refusal %v wraps no refusal sentinel", r.Err)
		}
		if r.Jobs != nil || r.Submits != nil || r.Workflow != "" {
			t.Fatalf("refused entry reports results: %+v", r)
		}
	}
	if got := fuzzHash(t, a); got != want {
		t.Fatalf("state differs from the reference (err=%v): %s vs %s", r.Err, got, want)
	}
	checkIndexes(t, a)
	applyRaw(t, a, idx+1, data) // the same command again, later in the log
	checkIndexes(t, a)
	// The node still applies ordinary commands afterwards.
	h := &harness{t: t, f: a, idx: idx + 1, now: t0}
	h.addNode("after")
}

// deepCopy copies v so that mutating the copy leaves the seeds alone.
func deepCopy(v reflect.Value) reflect.Value {
	c := reflect.New(v.Type()).Elem()
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return c
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(deepCopy(v.Elem()))
		return p
	case reflect.Slice:
		if v.IsNil() {
			return c
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			s.Index(i).Set(deepCopy(v.Index(i)))
		}
		return s
	case reflect.Map:
		if v.IsNil() {
			return c
		}
		m := reflect.MakeMap(v.Type())
		for _, k := range v.MapKeys() {
			m.SetMapIndex(k, deepCopy(v.MapIndex(k)))
		}
		return m
	case reflect.Struct:
		if v.Type() == timeType {
			return v
		}
		for i := range v.NumField() {
			c.Field(i).Set(deepCopy(v.Field(i)))
		}
		return c
	}
	c.Set(v)
	return c
}

// mutate replaces some of v's fields, recursively, with hostile values.
func mutate(rnd *rand.Rand, v reflect.Value, tok uint64) {
	hit := func() bool { return rnd.IntN(4) == 0 }
	switch {
	case v.Type() == timeType:
		if hit() {
			times := []time.Time{{}, time.Unix(0, 0), time.Unix(-62135596800, 0), time.Unix(253402300799, 999999999),
				t0.Add(-time.Nanosecond), t0.Add(100 * 365 * 24 * time.Hour)}
			v.Set(reflect.ValueOf(times[rnd.IntN(len(times))]))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		if hit() {
			strs := []string{"", "n1", "n2", "after", jobID(1), jobID(2), jobID(3), jobID(5), jobID(404), "01WF", "s1", "q",
				"a/b", "\x00", "..", strings.Repeat("x", 300), strings.Repeat("y", 70000), "\xff\xfe", "always", "failure",
				"running", "succeeded", "lost", "killed", "dead", "left", "draining", "forbid", "replace", "all", "skip",
				"@every 1s", "* * * * *", "zone == a", "http", "container"}
			v.SetString(strs[rnd.IntN(len(strs))])
		}
	case reflect.Bool:
		if hit() {
			v.SetBool(!v.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if hit() {
			ints := []int64{0, -1, 1, 2, 100, 101, 1 << 31, -1 << 31, 1<<63 - 1, -1 << 63}
			n := ints[rnd.IntN(len(ints))]
			if v.OverflowInt(n) {
				n = -1
			}
			v.SetInt(n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if hit() {
			uints := []uint64{0, 1, tok, tok + 1, tok - 1, 1<<64 - 1}
			n := uints[rnd.IntN(len(uints))]
			if v.OverflowUint(n) {
				n = 1
			}
			v.SetUint(n)
		}
	case reflect.Float32, reflect.Float64:
		if hit() {
			fs := []float64{0, -1, 1e308, -1e308, math.NaN(), math.Inf(1), math.Inf(-1), 1e-300}
			v.SetFloat(fs[rnd.IntN(len(fs))])
		}
	case reflect.Pointer:
		switch {
		case hit():
			v.Set(reflect.Zero(v.Type()))
		case v.IsNil() && hit():
			v.Set(reflect.New(v.Type().Elem()))
			mutate(rnd, v.Elem(), tok)
		case !v.IsNil():
			mutate(rnd, v.Elem(), tok)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // []byte
			if hit() {
				v.SetBytes(make([]byte, rnd.IntN(200000)))
			}
			return
		}
		switch {
		case hit() && rnd.IntN(2) == 0:
			v.Set(reflect.Zero(v.Type())) // nil
		case hit() && v.Len() > 0:
			v.Set(reflect.Append(v, v.Index(rnd.IntN(v.Len())))) // a duplicate element
		case hit():
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem()))) // a zero element
		}
		for i := range v.Len() {
			mutate(rnd, v.Index(i), tok)
		}
	case reflect.Map:
		if hit() {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if v.IsNil() && hit() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		if v.IsNil() {
			return
		}
		if hit() && v.Type().Key().Kind() == reflect.String {
			v.SetMapIndex(reflect.ValueOf("").Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		}
		for _, k := range v.MapKeys() {
			e := deepCopy(v.MapIndex(k))
			mutate(rnd, e, tok)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				mutate(rnd, v.Field(i), tok)
			}
		}
	}
}

// openFuzzFSM opens a small FSM at path, first writing state there if given.
func openFuzzFSM(tb testing.TB, path string, state []byte) *FSM {
	tb.Helper()
	if state != nil {
		if err := os.WriteFile(path, state, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	f, err := Open(path, Options{NoSync: true, InitialMmapSize: 1 << 16, EventBuffer: 16, ReleaseInterval: -1})
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
