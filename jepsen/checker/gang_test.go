package checker

import (
	"strings"
	"testing"
	"time"
)

func gangRecs(t *testing.T, text string) []GangRecord {
	t.Helper()
	recs, torn, err := ParseGangRecords(strings.NewReader(text))
	if err != nil || torn != 0 {
		t.Fatalf("parse: %v, %d torn", err, torn)
	}
	return recs
}

var gangOpt = GangOptions{Bound: 10 * time.Second, TickBound: time.Second, ClockBound: time.Millisecond}

func TestGangPartial(t *testing.T) {
	// Task 1 fails at 2 s; task 0 is stopped at 5 s: within the bound.
	ok := gangRecs(t, `start j 1 10 n1 0 0
start j 2 10 n2 1 0
fail j 2 10 n2 1 2000000000
tick j 1 10 n1 0 4500000000
term j 1 10 n1 0 5000000000
`)
	if r := GangPartial(ok, gangOpt); !r.Valid || r.Stats["overrun_max_ms"] != 3000 || r.Stats["stopped_placements"] != 1 {
		t.Fatalf("%+v", r)
	}
	// Task 0 keeps ticking 20 s after its sibling failed: the partial gang
	// ran past the bound.
	bad := gangRecs(t, `start j 1 10 n1 0 0
start j 2 10 n2 1 0
fail j 2 10 n2 1 2000000000
tick j 1 10 n1 0 22000000000
end j 1 10 n1 0 22500000000
`)
	if r := GangPartial(bad, gangOpt); r.Valid {
		t.Fatalf("overrun passed: %+v", r)
	}
	// A killed sibling (no final record) stopped within [last, last+tick]:
	// a task seen 10.5 s after its last record is only possibly late.
	maybe := gangRecs(t, `start j 1 10 n1 0 0
start j 2 10 n2 1 0
tick j 2 10 n2 1 1000000000
tick j 1 10 n1 0 11500000000
term j 1 10 n1 0 11600000000
`)
	if r := GangPartial(maybe, gangOpt); !r.Valid || r.Stats["possible_overruns"] != 1 {
		t.Fatalf("%+v", r)
	}
	// Both succeed at different times: nothing stopped.
	succ := gangRecs(t, `start j 1 10 n1 0 0
start j 2 10 n2 1 0
end j 2 10 n2 1 1000000000
end j 1 10 n1 0 30000000000
`)
	if r := GangPartial(succ, gangOpt); !r.Valid || r.Stats["stopped_placements"] != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestGangPlacements(t *testing.T) {
	final := []FinalJob{{ID: "j", State: "succeeded", Attempts: []FinalAttempt{
		{Attempt: 1, Node: "n1", State: "killed", FencingToken: 10, Task: &FinalTask{Index: 0}},
		{Attempt: 2, Node: "n2", State: "failed", FencingToken: 10, Task: &FinalTask{Index: 1}},
		{Attempt: 3, Node: "n2", State: "succeeded", FencingToken: 20, Task: &FinalTask{Index: 0}},
		{Attempt: 4, Node: "n3", State: "succeeded", FencingToken: 20, Task: &FinalTask{Index: 1}},
	}}}
	first := `start j 1 10 n1 0 0
start j 2 10 n2 1 0
fail j 2 10 n2 1 2000000000
term j 1 10 n1 0 3000000000
`
	ok := gangRecs(t, first+`start j 3 20 n2 0 4000000000
start j 4 20 n3 1 4000000000
end j 3 20 n2 0 6000000000
end j 4 20 n3 1 6000000000
`)
	if r := GangPlacements(ok, final, gangOpt); !r.Valid || r.Stats["replaced_jobs"] != 1 {
		t.Fatalf("%+v", r)
	}
	// The second placement starts while task 0 of the first still runs.
	overlap := gangRecs(t, first[:strings.Index(first, "term")]+`tick j 1 10 n1 0 5000000000
start j 3 20 n2 0 4000000000
start j 4 20 n3 1 4000000000
`)
	if r := GangPlacements(overlap, final, gangOpt); r.Valid {
		t.Fatalf("overlap passed: %+v", r)
	}
	// A task that ran on another node than the cluster recorded.
	wrong := gangRecs(t, first+`start j 3 20 n1 0 4000000000
`)
	if r := GangPlacements(wrong, final, gangOpt); r.Valid {
		t.Fatalf("wrong node passed: %+v", r)
	}
	// Two tasks of one spread placement on one node.
	packed := gangRecs(t, `start j 1 10 n1 0 0
start j 2 10 n1 1 0
`)
	if r := GangPlacements(packed, nil, gangOpt); r.Valid {
		t.Fatalf("packed spread gang passed: %+v", r)
	}
}

func TestPreempted(t *testing.T) {
	recs := gangRecs(t, `start v 1 10 n1 -1 0
term v 1 10 n1 -1 1000000000
start v 2 30 n2 -1 3000000000
end v 2 30 n2 -1 6000000000
`)
	victim := FinalJob{ID: "v", State: "succeeded", IdempotencyKey: "k1", Attempts: []FinalAttempt{
		{Attempt: 1, Node: "n1", State: "killed", Reason: "preempted", FencingToken: 10},
		{Attempt: 2, Node: "n2", State: "succeeded", FencingToken: 30}}}
	acked := map[string]string{"k1": "v"}
	if r := Preempted(recs, []FinalJob{victim}, acked, PreemptedOptions{}); !r.Valid || r.Stats["victims_rerun"] != 1 {
		t.Fatalf("%+v", r)
	}
	// The victim vanished from the listing.
	if r := Preempted(recs, nil, acked, PreemptedOptions{}); r.Valid {
		t.Fatalf("lost victim passed: %+v", r)
	}
	// The victim ended failed though it was built to succeed.
	failed := victim
	failed.State = "failed"
	if r := Preempted(recs, []FinalJob{failed}, acked, PreemptedOptions{}); r.Valid {
		t.Fatalf("failed victim passed: %+v", r)
	}
	if r := Preempted(recs, []FinalJob{failed}, acked, PreemptedOptions{MayFail: func(string) bool { return true }}); !r.Valid {
		t.Fatalf("%+v", r)
	}
	// Succeeded, but no record of the attempt after the preemption.
	if r := Preempted(recs[:2], []FinalJob{victim}, acked, PreemptedOptions{}); r.Valid {
		t.Fatalf("rerun without records passed: %+v", r)
	}
	// Still queued after the drain: noted, not failed.
	queued := victim
	queued.State, queued.Attempts = "queued", victim.Attempts[:1]
	if r := Preempted(recs, []FinalJob{queued}, acked, PreemptedOptions{}); !r.Valid || r.Stats["victims_pending"] != 1 {
		t.Fatalf("%+v", r)
	}
}
