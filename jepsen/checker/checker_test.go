package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/jepsen/history"
)

func submit(p int, key, id string, call, ret int64, out history.Outcome) history.Op {
	return history.Op{Process: p, Kind: history.Submit, Key: key, JobID: id, Call: call, Return: ret, Outcome: out}
}

func read(p int, id, state string, idx uint64, call, ret int64) history.Op {
	return history.Op{Process: p, Kind: history.Read, JobID: id, State: state, ModifyIndex: idx, Call: call, Return: ret, Outcome: history.OK}
}

func TestQueue(t *testing.T) {
	ops := []history.Op{
		submit(0, "k1", "j1", 0, 10, history.OK),
		submit(0, "k2", "j2", 20, 30, history.OK),
		submit(1, "k3", "", 5, 15, history.Info), // indeterminate, later present
		submit(1, "k4", "", 40, 50, history.Info),
		submit(1, "k5", "j5", 40, 50, history.OK),
	}
	tests := []struct {
		name  string
		final []FinalJob
		valid bool
		stat  string
		want  int
	}{
		{"all present", []FinalJob{{"j1", "succeeded", "k1", nil}, {"j2", "failed", "k2", nil}, {"j5", "succeeded", "k5", nil}}, true, "lost", 0},
		{"lost job detected", []FinalJob{{"j1", "succeeded", "k1", nil}, {"j5", "succeeded", "k5", nil}}, false, "lost", 1},
		{"recovered info", []FinalJob{{"j1", "succeeded", "k1", nil}, {"j2", "succeeded", "k2", nil}, {"j3", "succeeded", "k3", nil}, {"j5", "succeeded", "k5", nil}}, true, "recovered", 1},
		{"duplicate key", []FinalJob{{"j1", "succeeded", "k1", nil}, {"j1b", "succeeded", "k1", nil}, {"j2", "succeeded", "k2", nil}, {"j5", "succeeded", "k5", nil}}, false, "duplicated", 1},
		{"nemesis load left out", []FinalJob{{"j1", "succeeded", "k1", nil}, {"j2", "succeeded", "k2", nil}, {"j5", "succeeded", "k5", nil}, {"x", "running", LoadKeyPrefix + "1-0", nil}}, true, "unexpected", 0},
		{"unexpected", []FinalJob{{"j1", "succeeded", "k1", nil}, {"j2", "succeeded", "k2", nil}, {"j5", "succeeded", "k5", nil}, {"x", "succeeded", "zz", nil}}, false, "unexpected", 1},
		{"stuck", []FinalJob{{"j1", "running", "k1", nil}, {"j2", "succeeded", "k2", nil}, {"j5", "succeeded", "k5", nil}}, false, "stuck", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Queue(ops, tc.final)
			if r.Valid != tc.valid || r.Stats[tc.stat] != tc.want {
				t.Fatalf("got %v, want valid=%v %s=%d", r, tc.valid, tc.stat, tc.want)
			}
			if r.Stats["attempted"] != 5 || r.Stats["acknowledged"] != 3 {
				t.Fatalf("counts: %v", r.Stats)
			}
		})
	}
}

func rec(kind, job string, attempt int, token uint64, node string, at int64) Record {
	return Record{kind, job, attempt, token, node, at}
}

func TestParseRecords(t *testing.T) {
	in := "start j1 1 7 n1 100\nend j1 1 7 n1 200\nend j1 1 7\n\nstart j2 x 1 n1 5\n"
	recs, torn, err := ParseRecords(strings.NewReader(in))
	if err != nil || len(recs) != 2 || torn != 2 || recs[1] != rec("end", "j1", 1, 7, "n1", 200) {
		t.Fatalf("recs=%v torn=%d err=%v", recs, torn, err)
	}
}

func TestExecution(t *testing.T) {
	ms := int64(time.Millisecond)
	ok := []FinalJob{{ID: "j1", State: "succeeded", Attempts: []FinalAttempt{{1, "n1", "lost", 10, "", nil, nil, nil}, {2, "n2", "succeeded", 20, "", nil, nil, nil}}}}
	tests := []struct {
		name  string
		exec  []Record
		sink  []Record
		final []FinalJob
		valid bool
		stat  string
		want  int
	}{
		{"sequential re-execution", []Record{
			rec("start", "j1", 1, 10, "n1", 0), rec("end", "j1", 1, 10, "n1", 100*ms),
			rec("start", "j1", 2, 20, "n2", 200*ms), rec("end", "j1", 2, 20, "n2", 300*ms)},
			[]Record{rec("effect", "j1", 1, 10, "n1", 100*ms), rec("effect", "j1", 2, 20, "n2", 300*ms)},
			ok, true, "completions_after_lost", 1},
		{"overlap detected", []Record{
			rec("start", "j1", 1, 10, "n1", 0), rec("end", "j1", 1, 10, "n1", 500*ms),
			rec("start", "j1", 2, 20, "n2", 200*ms), rec("end", "j1", 2, 20, "n2", 300*ms)},
			[]Record{rec("effect", "j1", 2, 20, "n2", 300*ms)}, ok, false, "overlaps", 1},
		{"never-ended execution overlaps", []Record{
			rec("start", "j1", 1, 10, "n1", 0),
			rec("start", "j1", 2, 20, "n2", 200*ms), rec("end", "j1", 2, 20, "n2", 300*ms)},
			[]Record{rec("effect", "j1", 2, 20, "n2", 300*ms)}, ok, false, "overlaps", 1},
		{"stale token rejected by the sink", []Record{
			rec("start", "j1", 1, 10, "n1", 0), rec("end", "j1", 1, 10, "n1", 100*ms),
			rec("start", "j1", 2, 20, "n2", 200*ms), rec("end", "j1", 2, 20, "n2", 300*ms)},
			[]Record{rec("effect", "j1", 2, 20, "n2", 300*ms), rec("effect", "j1", 1, 10, "n1", 400*ms)},
			ok, true, "stale_rejected", 1},
		{"double completion detected", []Record{
			rec("start", "j1", 1, 10, "n1", 0), rec("end", "j1", 1, 10, "n1", 100*ms),
			rec("start", "j1", 2, 20, "n2", 200*ms), rec("end", "j1", 2, 20, "n2", 300*ms)},
			[]Record{rec("effect", "j1", 1, 10, "n1", 100*ms), rec("effect", "j1", 2, 20, "n2", 300*ms)},
			[]FinalJob{{ID: "j1", State: "succeeded", Attempts: []FinalAttempt{{1, "n1", "failed", 10, "", nil, nil, nil}, {2, "n2", "succeeded", 20, "", nil, nil, nil}}}},
			false, "double_completions", 1},
		{"superseded token accepted", []Record{
			rec("start", "j1", 2, 20, "n2", 200*ms), rec("end", "j1", 2, 20, "n2", 300*ms),
			rec("start", "j1", 3, 30, "n3", 400*ms), rec("end", "j1", 3, 30, "n3", 500*ms)},
			[]Record{rec("effect", "j1", 3, 30, "n3", 500*ms)}, ok, false, "overlaps", 0},
		{"phantom success", nil, nil, ok, false, "executions", 0},
		{"token reused", []Record{
			rec("start", "j1", 2, 20, "n2", 0), rec("start", "j1", 2, 20, "n3", 10*ms), rec("end", "j1", 2, 20, "n2", 300*ms)},
			nil, ok, false, "executions", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Execution(tc.exec, tc.sink, tc.final, ExecOptions{ClockBound: 5 * time.Millisecond, EndOfTest: 1000 * ms})
			if r.Valid != tc.valid || r.Stats[tc.stat] != tc.want {
				t.Fatalf("got %v notes=%v, want valid=%v %s=%d", r, r.Notes, tc.valid, tc.stat, tc.want)
			}
		})
	}
}

// A killed execution ran until its last tick for certain and may have run
// up to the bound after it: a replacement that started after that does not
// overlap, one that started inside the window possibly does (noted), one
// that started while it still ticked certainly does (failed).
func TestExecutionTicks(t *testing.T) {
	ms := int64(time.Millisecond)
	ok := []FinalJob{{ID: "j1", State: "succeeded", Attempts: []FinalAttempt{{1, "n1", "lost", 10, "", nil, nil, nil}, {2, "n2", "succeeded", 20, "", nil, nil, nil}}}}
	killed := []Record{rec("start", "j1", 1, 10, "n1", 0), rec("tick", "j1", 1, 10, "n1", 500*ms), rec("tick", "j1", 1, 10, "n1", 1000*ms)}
	tests := []struct {
		name      string
		nextStart int64
		overlaps  int
		possible  int
	}{
		{"replacement after the kill", 2100 * ms, 0, 0},
		{"replacement inside the tick bound", 1500 * ms, 0, 1},
		{"replacement while it ticked", 900 * ms, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exec := append(append([]Record{}, killed...), rec("start", "j1", 2, 20, "n2", tc.nextStart), rec("end", "j1", 2, 20, "n2", tc.nextStart+300*ms))
			r := Execution(exec, []Record{rec("effect", "j1", 2, 20, "n2", tc.nextStart+300*ms)}, ok,
				ExecOptions{ClockBound: time.Millisecond, EndOfTest: 100000 * ms, TickBound: time.Second})
			if r.Stats["overlaps"] != tc.overlaps || r.Stats["possible_overlaps"] != tc.possible || r.Valid != (tc.overlaps == 0) {
				t.Fatalf("got %v", r)
			}
		})
	}
}

func TestReads(t *testing.T) {
	base := []history.Op{submit(0, "k1", "j1", 0, 10, history.OK)}
	tests := []struct {
		name  string
		ops   []history.Op
		valid bool
	}{
		{"forward progress", []history.Op{read(1, "j1", "queued", 5, 20, 30), read(2, "j1", "running", 7, 25, 40), read(1, "j1", "succeeded", 9, 50, 60)}, true},
		{"concurrent reads either order", []history.Op{read(1, "j1", "running", 7, 20, 60), read(2, "j1", "queued", 5, 25, 40)}, true},
		{"stale read after newer", []history.Op{read(1, "j1", "running", 7, 20, 30), read(2, "j1", "queued", 5, 40, 50)}, false},
		{"terminal regresses", []history.Op{read(1, "j1", "succeeded", 0, 20, 30), read(2, "j1", "running", 0, 40, 50)}, false},
		{"same index two states", []history.Op{read(1, "j1", "running", 7, 20, 30), read(2, "j1", "retrying", 7, 40, 50)}, false},
		{"acked job read as missing", []history.Op{{Process: 1, Kind: history.Read, JobID: "j1", NotFound: true, Call: 20, Return: 30, Outcome: history.OK}}, false},
		{"info reads ignored", []history.Op{read(1, "j1", "running", 7, 20, 30), {Process: 2, Kind: history.Read, JobID: "j1", State: "queued", ModifyIndex: 1, Call: 40, Return: 50, Outcome: history.Info}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			html := filepath.Join(t.TempDir(), "history.html")
			r := Reads(append(append([]history.Op{}, base...), tc.ops...), LinearOptions{Timeout: 10 * time.Second, HTMLPath: html,
				Events: []history.Event{{Name: "halves", Start: 15, End: 45}}})
			if r.Valid != tc.valid {
				t.Fatalf("got %v", r)
			}
			_, err := os.Stat(html)
			if tc.valid != os.IsNotExist(err) {
				t.Fatalf("visualisation saved only on failure: valid=%v stat err=%v", tc.valid, err)
			}
		})
	}
}

func TestConvergence(t *testing.T) {
	same := []NodeHash{{"n1", 9, "a", ""}, {"n2", 9, "a", ""}}
	if r := Convergence(same, 1); !r.Valid {
		t.Fatal(r)
	}
	for _, hs := range [][]NodeHash{
		{{"n1", 9, "a", ""}, {"n2", 9, "b", ""}},
		{{"n1", 9, "a", ""}, {"n2", 8, "a", ""}},
		{{"n1", 9, "a", ""}, {"n2", 0, "", "timeout"}},
		nil,
	} {
		if r := Convergence(hs, 3); r.Valid {
			t.Fatalf("%v should fail", hs)
		}
	}
}
