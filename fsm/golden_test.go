package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The state a fixed log produces must not change when the apply path is
// optimised: every node of a cluster (and every binary that replays an old
// log) has to end at the same bytes. The golden hashes below were computed
// by the code before the apply-path optimisations (commit 6a18018); a
// change that alters any stored record, key or index entry fails here. A
// deliberate format change (a new schema version) updates them.
//
// Job timelines (bucket job_events) came later: the hashes above are of
// every other bucket, which timelines must not change, and the
// *WithTimeline ones of the whole state since (their values changed
// again when the schedules bucket came, whose name the hash covers even
// empty; the hashes above leave it out too). Both changed once more when
// a job's user (and namespace) joined its placement group, which re-keys
// queued_by_group entries of jobs that name a user (groupVersion 2).
const (
	goldenWorkloadHash = "44954808a1f67121ddbbe88c04e93160c3c5e4928e1f02773327f4d8e36a1032"
	goldenGenLogHash   = "6c23633b500ac9cc2623047bdeed61374fec57dea6c6217b7bc060adcb8c67fc"

	goldenWorkloadHashWithTimeline = "5311aacbab8183a07802574cdff277d27fa85be8af256efce069b058a80fc854"
	goldenGenLogHashWithTimeline   = "78b3e4365c90dee2644a5940a04208abbc5f963fd13874c6fee5ba8f71f2bbb7"
)

// hashBeforeTimelines is the state hash without the timelines' (and the
// schedules') bucket.
func hashBeforeTimelines(t *testing.T, h *harness) string {
	t.Helper()
	_, s, err := h.f.stateHash(map[string]bool{string(bucketJobEvents): true, string(bucketSchedules): true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// goldenLog drives every handler through the batched commands (submit
// groups, report batches) with specs that use every field, including a
// JSON (version 1) entry and a spec whose encoding holds CBOR nulls.
func goldenLog(t testing.TB) *harness {
	t.Helper()
	h := newHarness(t)
	h.addNode("n1")
	h.addNode("n2")
	h.must(CmdInit, InitCluster{ClusterID: "golden"})
	h.must(CmdSetQueue, SetQueue{Name: "q1", MaxRunning: 5})
	dl := t0.Add(time.Hour)
	soon := t0.Add(30 * time.Second)
	spec := func(i int) JobSpec {
		s := JobSpec{
			Name: fmt.Sprintf("job-%d", i), Command: []string{"/bin/sh", "-c", fmt.Sprintf("exit %d", i%4)},
			Env:       map[string]string{"A": "1", "B": fmt.Sprint(i)},
			Labels:    map[string]string{"team": []string{"a", "b"}[i%2], "k": "v"},
			Resources: Resources{CPU: int64(100 * (i%3 + 1)), MemoryMB: 64, Named: map[string]int64{"gpu": int64(i % 2)}},
			Priority:  40 + i%3, MaxAttempts: i % 4, Timeout: Duration(time.Minute),
			Driver: "process", Image: "img", Network: "none", User: "u", KillSignal: "SIGTERM", KillTimeout: Duration(time.Second),
			Queue: []string{"", "q1"}[i%2], Constraints: []string{"zone == a"}, Placement: "spread",
			Backoff:          Backoff{Initial: Duration(time.Second), Multiplier: 1.5, Max: Duration(time.Minute), Jitter: 0.25},
			NoRetryExitCodes: []int{3},
		}
		switch i % 5 {
		case 1:
			s.Deadline = &dl
		case 2:
			s.RunAt = &soon
		case 3:
			s.Command = nil // encoded as CBOR null
			s.Constraints, s.Env, s.Labels = nil, nil, nil
		}
		return s
	}
	var p SubmitJobs
	for i := range 20 {
		nj := NewJob{ID: jobID(i), Spec: spec(i)}
		if i%4 == 0 {
			nj.IdempotencyKey = fmt.Sprintf("key-%d", i)
		}
		p.Jobs = append(p.Jobs, nj)
	}
	h.must(CmdSubmitJobs, p)
	var g SubmitGroup
	for m := range 4 {
		var sj SubmitJobs
		for k := range 3 {
			i := 20 + m*3 + k
			sj.Jobs = append(sj.Jobs, NewJob{ID: jobID(i), Spec: spec(i), IdempotencyKey: fmt.Sprintf("key-%d", i%24)})
		}
		g.Submits = append(g.Submits, sj)
	}
	g.Submits = append(g.Submits, SubmitJobs{Jobs: []NewJob{{ID: "bad/id"}}}) // refused member
	h.must(CmdSubmitGroup, g)
	// A version 1 (JSON) entry, with a zero run_at (a non-nil pointer).
	h.idx++
	h.f.Apply(rawEntry(h.idx, []byte(`{"v":1,"t":"submit_jobs","at":"2025-01-02T03:04:06Z","p":{"jobs":[`+
		`{"id":"01V1JOB0000000000000000001","spec":{"command":["true"],"run_at":"0001-01-01T00:00:00Z","priority":50,"labels":{"x":"y"}}}]}}`)))

	queued := func() []string {
		var ids []string
		_ = h.f.View(func(tx *Tx) error {
			return tx.ForEachJobInState(JobQueued, func(j *Job) bool { ids = append(ids, j.ID); return true })
		})
		return ids
	}
	placeAll := func() {
		var pl Place
		for i, id := range queued() {
			pl.Placements = append(pl.Placements, Placement{JobID: id, Node: []string{"n1", "n2"}[i%2], Resources: Resources{CPU: 100}})
		}
		h.must(CmdPlace, pl)
	}
	live := func() []Attempt {
		var out []Attempt
		_ = h.f.View(func(tx *Tx) error {
			return tx.LiveAttempts(func(a *Attempt) bool { out = append(out, *a); return true })
		})
		return out
	}
	ref := func(a Attempt) ReportAttempt {
		return ReportAttempt{JobID: a.JobID, Attempt: a.Num, FencingToken: a.FencingToken, Node: a.Node}
	}
	finish := func(round int) {
		var rb ReportAttempts
		for i, a := range live() {
			r := ref(a)
			switch (i + round) % 7 {
			case 0, 1:
				r.State, r.ExitCode = AttemptSucceeded, intp(0)
			case 2:
				r.State, r.ExitCode, r.StderrTail = AttemptFailed, intp(1), "boom"
			case 3:
				r.State, r.ExitCode = AttemptFailed, intp(3)
			case 4:
				r.State, r.Reason = AttemptKilled, ReasonFenced
			case 5:
				r.State, r.OOM, r.PeakMemoryB, r.CPUTimeNs = AttemptKilled, true, 1<<20, 12345
			case 6:
				r.FencingToken++ // stale
				r.State = AttemptSucceeded
			}
			r.FinishedAt = h.now.Add(-time.Duration(i) * time.Millisecond)
			rb.Reports = append(rb.Reports, r)
		}
		h.must(CmdReportBatch, rb)
	}
	for round := range 3 {
		placeAll()
		h.now = h.now.Add(time.Second)
		var rb ReportAttempts
		for i, a := range live() {
			r := ref(a)
			r.State = AttemptRunning
			if i%2 == 0 {
				r.StartedAt = h.now.Add(-time.Millisecond)
			}
			rb.Reports = append(rb.Reports, r)
		}
		h.must(CmdReportBatch, rb)
		if la := live(); len(la) > 2 {
			h.must(CmdCancelJob, CancelJob{JobID: la[0].JobID})
			h.apply(CmdMarkLost, MarkLost{Node: la[1].Node, Attempts: []AttemptRef{{JobID: la[1].JobID, Attempt: la[1].Num, FencingToken: la[1].FencingToken}}})
			h.apply(CmdStopAttempts, StopAttempts{Reason: ReasonDrained, Attempts: []AttemptRef{{JobID: la[2].JobID, Attempt: la[2].Num, FencingToken: la[2].FencingToken}}})
		}
		h.now = h.now.Add(2 * time.Second)
		finish(round)
		if la := live(); len(la) > 0 {
			r := ref(la[0])
			r.State, r.ExitCode = AttemptSucceeded, intp(0)
			h.apply(CmdReport, r)
		}
		h.now = h.now.Add(time.Minute)
		var rel ReleaseJobs
		for _, st := range []JobState{JobRetrying, JobWaiting} {
			_ = h.f.View(func(tx *Tx) error {
				return tx.ForEachJobInState(st, func(j *Job) bool { rel.JobIDs = append(rel.JobIDs, j.ID); return true })
			})
		}
		h.must(CmdRelease, rel)
		reasons := map[string]string{}
		for i, id := range queued() {
			reasons[id] = fmt.Sprintf("no fit %d", i%2)
		}
		h.must(CmdSetReasons, SetReasons{Reasons: reasons})
		var failed []string
		_ = h.f.View(func(tx *Tx) error {
			return tx.ForEachJobInState(JobFailed, func(j *Job) bool { failed = append(failed, j.ID); return true })
		})
		if len(failed) > 0 {
			h.must(CmdRetryJob, RetryJob{JobID: failed[0]})
		}
		if q := queued(); len(q) > 1 {
			h.must(CmdFailJobs, FailJobs{JobIDs: q[len(q)-1:], Reason: "deadline"})
			h.must(CmdCancelJob, CancelJob{JobID: q[0], Reason: "user"})
		}
	}
	h.must(CmdGC, GC{Before: h.now.Add(-90 * time.Second), KeysBefore: t0.Add(time.Second)})
	h.idx++
	h.f.Apply(&raft.Log{Index: h.idx, Term: 1, Type: raft.LogConfiguration, Data: []byte("cfg")})
	return h
}

func TestGoldenStateHash(t *testing.T) {
	h := goldenLog(t)
	checkIndexes(t, h.f)
	if got := hashBeforeTimelines(t, h); got != goldenWorkloadHash {
		t.Errorf("golden workload: state hash %s, want %s", got, goldenWorkloadHash)
	}
	if got := h.hash(); got != goldenWorkloadHashWithTimeline {
		t.Errorf("golden workload with timelines: state hash %s, want %s", got, goldenWorkloadHashWithTimeline)
	}
	_, ref := genLog(t, 7, 1500)
	if got := hashBeforeTimelines(t, ref); got != goldenGenLogHash {
		t.Errorf("genLog(7, 1500): state hash %s, want %s", got, goldenGenLogHash)
	}
	if got := ref.hash(); got != goldenGenLogHashWithTimeline {
		t.Errorf("genLog(7, 1500) with timelines: state hash %s, want %s", got, goldenGenLogHashWithTimeline)
	}
}
