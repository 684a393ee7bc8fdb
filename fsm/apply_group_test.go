package fsm

import (
	"errors"
	"strings"
	"testing"
)

func newJob(id, key string) NewJob {
	return NewJob{ID: id, Spec: JobSpec{Command: []string{"true"}}, IdempotencyKey: key}
}

// TestSubmitGroup: each member of a group commit gets its own outcome: its
// jobs, its own idempotency dedup (also against an earlier member of the
// same entry), and a refusal that leaves the other members applied.
func TestSubmitGroup(t *testing.T) {
	h := newHarness(t)
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{newJob(jobID(1), "old-key")}})

	r := h.must(CmdSubmitGroup, SubmitGroup{Submits: []SubmitJobs{
		{Jobs: []NewJob{newJob(jobID(2), "")}},                         // plain
		{Jobs: []NewJob{newJob(jobID(3), "k")}},                        // new key
		{Jobs: []NewJob{newJob(jobID(4), "k")}},                        // same key, same entry
		{Jobs: []NewJob{newJob(jobID(5), "old-key")}},                  // key of an earlier entry
		{Jobs: []NewJob{newJob(jobID(6), ""), newJob("bad/id", "")}},   // refused whole
		{Jobs: []NewJob{newJob(jobID(7), ""), newJob(jobID(8), "k2")}}, // a batch member
	}})
	want := []struct {
		jobs    []SubmitResult
		refused string
	}{
		{jobs: []SubmitResult{{ID: jobID(2)}}},
		{jobs: []SubmitResult{{ID: jobID(3)}}},
		{jobs: []SubmitResult{{ID: jobID(3), Duplicate: true}}},
		{jobs: []SubmitResult{{ID: jobID(1), Duplicate: true}}},
		{refused: "jobs[1].id"},
		{jobs: []SubmitResult{{ID: jobID(7)}, {ID: jobID(8)}}},
	}
	if len(r.Submits) != len(want) {
		t.Fatalf("%d member results, want %d: %+v", len(r.Submits), len(want), r.Submits)
	}
	for i, w := range want {
		got := r.Submits[i]
		if w.refused != "" {
			if err := got.Err(); !errors.Is(err, ErrBadCommand) || !strings.Contains(err.Error(), w.refused) || len(got.Jobs) != 0 {
				t.Errorf("member %d: %+v (err %v), want refused about %s", i, got, err, w.refused)
			}
			continue
		}
		if got.Err() != nil || len(got.Jobs) != len(w.jobs) {
			t.Errorf("member %d: %+v, want %+v", i, got, w.jobs)
			continue
		}
		for k := range w.jobs {
			if got.Jobs[k] != w.jobs[k] {
				t.Errorf("member %d job %d: %+v, want %+v", i, k, got.Jobs[k], w.jobs[k])
			}
		}
	}
	for _, id := range []string{jobID(2), jobID(3), jobID(7), jobID(8)} {
		if j := h.job(id); j.State != JobQueued || j.CreateIndex != r.Index {
			t.Errorf("job %s: %s at index %d, want queued at %d", id, j.State, j.CreateIndex, r.Index)
		}
	}
	// The refused member wrote nothing, not even its valid first job; the
	// duplicates created nothing.
	for _, id := range []string{jobID(4), jobID(5), jobID(6)} {
		if err := h.f.View(func(tx *Tx) error { _, err := tx.Job(id); return err }); !errors.Is(err, ErrNotFound) {
			t.Errorf("job %s: %v, want not found", id, err)
		}
	}
	checkIndexes(t, h.f)
}

// TestSubmitGroupMatchesSingles: a group leaves the same state as its
// members applied as separate entries at the same time (apart from the
// create index), so merging submits changes no outcome.
func TestSubmitGroupMatchesSingles(t *testing.T) {
	members := []SubmitJobs{
		{Jobs: []NewJob{newJob(jobID(1), "a")}},
		{Jobs: []NewJob{newJob(jobID(2), "a")}},
		{Jobs: []NewJob{newJob(jobID(3), ""), newJob(jobID(4), "b")}},
	}
	single := newHarness(t)
	var singles []SubmitResult
	for _, m := range members {
		singles = append(singles, single.must(CmdSubmitJobs, m).Jobs...)
	}
	group := newHarness(t)
	r := group.must(CmdSubmitGroup, SubmitGroup{Submits: members})
	var grouped []SubmitResult
	for _, m := range r.Submits {
		if m.Err() != nil {
			t.Fatalf("member refused: %v", m.Err())
		}
		grouped = append(grouped, m.Jobs...)
	}
	if len(grouped) != len(singles) {
		t.Fatalf("group %+v, singles %+v", grouped, singles)
	}
	for i := range singles {
		if grouped[i] != singles[i] {
			t.Errorf("result %d: group %+v, single %+v", i, grouped[i], singles[i])
		}
	}
	for _, id := range []string{jobID(1), jobID(3), jobID(4)} {
		g, s := group.job(id), single.job(id)
		if g.State != s.State || g.IdempotencyKey != s.IdempotencyKey || !g.SubmittedAt.Equal(s.SubmittedAt) {
			t.Errorf("job %s: group %+v, single %+v", id, g, s)
		}
	}
	checkIndexes(t, group.f)
}

// TestSubmitGroupDeterministic: two nodes applying the same group entry end
// with the same state hash.
func TestSubmitGroupDeterministic(t *testing.T) {
	p := SubmitGroup{Submits: []SubmitJobs{
		{Jobs: []NewJob{newJob(jobID(1), "x")}},
		{Jobs: []NewJob{newJob(jobID(2), "x")}},
		{Jobs: []NewJob{newJob("", "")}},
		{Jobs: []NewJob{newJob(jobID(3), "")}},
	}}
	a, b := newHarness(t), newHarness(t)
	a.must(CmdSubmitGroup, p)
	b.must(CmdSubmitGroup, p)
	if a.hash() != b.hash() {
		t.Fatal("state hashes differ after the same group entry")
	}
}
