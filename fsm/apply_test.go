package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func intp(v int) *int { return &v }

// TestApplyJobLifecycle walks each command through its documented
// transitions; every case ends with an index consistency check.
func TestApplyJobLifecycle(t *testing.T) {
	const j1, n1 = "01J1", "n1"
	tests := []struct {
		name string
		run  func(h *harness)
		// want is the job's state and attempt counters at the end.
		want    JobState
		wantCnt int
	}{
		{"submit queues", func(h *harness) { h.submit(j1) }, JobQueued, 0},
		{"submit with future run_at waits", func(h *harness) {
			rt := t0.Add(time.Hour)
			h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: j1, Spec: JobSpec{RunAt: &rt}}}})
			if got := h.job(j1).NextRunAt; !got.Equal(rt) {
				t.Errorf("NextRunAt = %v, want %v", got, rt)
			}
			// Not due yet: release and place both skip it.
			if r := h.must(CmdRelease, ReleaseJobs{JobIDs: []string{j1}}); r.Skipped[j1] == "" {
				t.Errorf("release of a job not due was not skipped")
			}
		}, JobWaiting, 0},
		{"release a due waiting job", func(h *harness) {
			rt := t0.Add(time.Minute)
			h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: j1, Spec: JobSpec{RunAt: &rt}}}})
			h.now = rt
			h.must(CmdRelease, ReleaseJobs{JobIDs: []string{j1}})
		}, JobQueued, 0},
		{"place assigns with the entry's index as token", func(h *harness) {
			h.addNode(n1)
			h.submit(j1)
			tok := h.place(j1, n1)
			a := h.attempt(j1, 1)
			if a.FencingToken != tok || a.State != AttemptAssigned || a.Node != n1 || !a.Counted {
				t.Errorf("attempt = %+v, want assigned on n1 with token %d", a, tok)
			}
		}, JobRunning, 1},
		{"running then succeeded", func(h *harness) {
			h.addNode(n1)
			h.submit(j1)
			tok := h.place(j1, n1)
			h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: AttemptRunning})
			if a := h.attempt(j1, 1); a.State != AttemptRunning || a.StartedAt.IsZero() {
				t.Errorf("attempt after running report = %+v", a)
			}
			h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: n1, State: AttemptSucceeded, ExitCode: intp(0)})
			if j := h.job(j1); j.FinishedAt.IsZero() || j.Current != 0 {
				t.Errorf("finished job = %+v", j)
			}
		}, JobSucceeded, 1},
		{"failure retries with backoff", func(h *harness) {
			h.addNode(n1)
			h.submit(j1)
			tok := h.place(j1, n1)
			h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, State: AttemptFailed, ExitCode: intp(3)})
			want := t0.Add(RetryDelay(j1, 1, Backoff{}))
			if got := h.job(j1).NextRunAt; !got.Equal(want) {
				t.Errorf("NextRunAt = %v, want %v", got, want)
			}
			// Place refuses until due.
			if r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: j1, Node: n1}}}); r.Skipped[j1] == "" {
				t.Errorf("placed a retrying job before NextRunAt")
			}
		}, JobRetrying, 1},
		{"attempts exhausted fails", func(h *harness) {
			h.addNode(n1)
			h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: j1, Spec: JobSpec{MaxAttempts: 2}}}})
			for n := 1; n <= 2; n++ {
				h.now = h.now.Add(time.Hour)
				tok := h.place(j1, n1)
				h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: n, FencingToken: tok, State: AttemptKilled, Reason: ReasonOOM, OOM: true})
			}
		}, JobFailed, 2},
		{"no-retry exit code fails at once", func(h *harness) {
			h.addNode(n1)
			h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: j1, Spec: JobSpec{NoRetryExitCodes: []int{42}}}}})
			tok := h.place(j1, n1)
			h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, State: AttemptFailed, ExitCode: intp(42)})
		}, JobFailed, 1},
		{"cancel without attempt", func(h *harness) {
			h.submit(j1)
			h.must(CmdCancelJob, CancelJob{JobID: j1})
		}, JobCancelled, 0},
		{"cancel with live attempt waits for the kill", func(h *harness) {
			h.addNode(n1)
			h.submit(j1)
			tok := h.place(j1, n1)
			h.must(CmdCancelJob, CancelJob{JobID: j1, Reason: "user"})
			if a := h.attempt(j1, 1); a.CancelRequested != ReasonCancelled {
				t.Errorf("CancelRequested = %q", a.CancelRequested)
			}
			if s := h.job(j1).State; s != JobRunning {
				t.Errorf("job state after cancel request = %s, want running", s)
			}
			h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, State: AttemptKilled, Reason: ReasonCancelled})
		}, JobCancelled, 1},
		{"retry a cancelled job resets the budget", func(h *harness) {
			h.submit(j1)
			h.must(CmdCancelJob, CancelJob{JobID: j1})
			h.must(CmdRetryJob, RetryJob{JobID: j1})
			if j := h.job(j1); !j.FinishedAt.IsZero() || j.Reason != "" {
				t.Errorf("retried job = %+v", j)
			}
		}, JobQueued, 0},
		{"lost attempt requeues and does not count", func(h *harness) {
			h.addNode(n1)
			h.submit(j1)
			tok := h.place(j1, n1)
			r := h.must(CmdMarkLost, MarkLost{Node: n1, Attempts: []AttemptRef{{JobID: j1, Attempt: 1, FencingToken: tok}}})
			if len(r.Skipped) != 0 {
				t.Errorf("skipped %v", r.Skipped)
			}
			if a := h.attempt(j1, 1); a.State != AttemptLost || a.Counted {
				t.Errorf("lost attempt = %+v", a)
			}
		}, JobQueued, 0},
		{"lost attempt of a cancelled job cancels it", func(h *harness) {
			h.addNode(n1)
			h.submit(j1)
			tok := h.place(j1, n1)
			h.must(CmdCancelJob, CancelJob{JobID: j1})
			h.must(CmdMarkLost, MarkLost{Node: n1, Attempts: []AttemptRef{{JobID: j1, Attempt: 1, FencingToken: tok}}})
		}, JobCancelled, 0},
		{"fenced kill requeues without counting", func(h *harness) {
			h.addNode(n1)
			h.submit(j1)
			tok := h.place(j1, n1)
			h.must(CmdReport, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, State: AttemptKilled, Reason: ReasonFenced})
		}, JobQueued, 0},
		{"fail jobs without live attempt", func(h *harness) {
			h.submit(j1)
			h.must(CmdFailJobs, FailJobs{JobIDs: []string{j1}, Reason: ReasonDeadline})
			if r := h.job(j1).Reason; r != ReasonDeadline {
				t.Errorf("reason = %q", r)
			}
		}, JobFailed, 0},
		{"set reasons only touches queued jobs", func(h *harness) {
			h.submit(j1)
			r := h.must(CmdSetReasons, SetReasons{Reasons: map[string]string{j1: "no node has 64 GiB", "missing": "x"}})
			if h.job(j1).Reason != "no node has 64 GiB" || r.Skipped["missing"] == "" {
				t.Errorf("reason = %q, skipped = %v", h.job(j1).Reason, r.Skipped)
			}
		}, JobQueued, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.run(h)
			j := h.job(j1)
			if j.State != tc.want || j.CountedAttempts != tc.wantCnt {
				t.Errorf("job state = %s counted = %d (reason %q), want %s counted = %d", j.State, j.CountedAttempts, j.Reason, tc.want, tc.wantCnt)
			}
			if j.ModifyIndex != j.ModifyIndex || j.ModifyIndex > h.idx {
				t.Errorf("ModifyIndex %d beyond applied %d", j.ModifyIndex, h.idx)
			}
			checkIndexes(t, h.f)
		})
	}
}

// TestApplyRefusals: every refused entry changes nothing but the applied
// index, and its error wraps the right sentinel.
func TestApplyRefusals(t *testing.T) {
	const j1, n1 = "01J1", "n1"
	setup := func(h *harness) uint64 {
		h.addNode(n1)
		h.addNode("n2")
		h.submit(j1, "01J2")
		return h.place(j1, n1)
	}
	tests := []struct {
		name string
		data func(h *harness, tok uint64) []byte
		want error
	}{
		{"garbage bytes", func(h *harness, _ uint64) []byte { return []byte("\x00\xffnot json") }, ErrBadCommand},
		{"empty entry", func(h *harness, _ uint64) []byte { return nil }, ErrBadCommand},
		{"newer version", func(h *harness, _ uint64) []byte {
			return []byte(`{"v":99,"t":"gc","at":"2025-01-01T00:00:00Z","p":{}}`)
		}, ErrUnsupportedVersion},
		{"unknown type", func(h *harness, _ uint64) []byte {
			return []byte(`{"v":1,"t":"nope","at":"2025-01-01T00:00:00Z","p":{}}`)
		}, ErrBadCommand},
		{"missing at", func(h *harness, _ uint64) []byte {
			return []byte(`{"v":1,"t":"gc","p":{}}`)
		}, ErrBadCommand},
		{"payload of the wrong shape", func(h *harness, _ uint64) []byte {
			return []byte(`{"v":1,"t":"submit_jobs","at":"2025-01-01T00:00:00Z","p":{"jobs":"x"}}`)
		}, ErrBadCommand},
		{"submit with one bad id writes none", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdSubmitJobs, t0, SubmitJobs{Jobs: []NewJob{{ID: "01J9"}, {ID: "a/b"}}})
		}, ErrBadCommand},
		{"submit with huge idempotency key", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdSubmitJobs, t0, SubmitJobs{Jobs: []NewJob{{ID: "01J9", IdempotencyKey: strings.Repeat("k", 40000)}}})
		}, ErrBadCommand},
		{"report with stale token", func(h *harness, tok uint64) []byte {
			return encodeCmd(t, CmdReport, t0, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok - 1, State: AttemptSucceeded})
		}, ErrStaleToken},
		{"report from another node", func(h *harness, tok uint64) []byte {
			return encodeCmd(t, CmdReport, t0, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: "n2", State: AttemptSucceeded})
		}, ErrStaleToken},
		{"report for an old attempt", func(h *harness, tok uint64) []byte {
			return encodeCmd(t, CmdReport, t0, ReportAttempt{JobID: j1, Attempt: 2, FencingToken: tok, State: AttemptSucceeded})
		}, ErrStaleToken},
		{"report with state lost", func(h *harness, tok uint64) []byte {
			return encodeCmd(t, CmdReport, t0, ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, State: AttemptLost})
		}, ErrBadCommand},
		{"report for unknown job", func(h *harness, tok uint64) []byte {
			return encodeCmd(t, CmdReport, t0, ReportAttempt{JobID: "zz", Attempt: 1, FencingToken: tok, State: AttemptRunning})
		}, ErrNotFound},
		{"retry a queued job", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdRetryJob, t0, RetryJob{JobID: "01J2"})
		}, ErrConflict},
		{"cancel unknown job", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdCancelJob, t0, CancelJob{JobID: "zz"})
		}, ErrNotFound},
		{"node state for unknown node", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdNodeState, t0, SetNodeState{Name: "zz", Gossip: NodeDead})
		}, ErrNotFound},
		{"node state with bad gossip", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdNodeState, t0, SetNodeState{Name: n1, Gossip: "asleep"})
		}, ErrBadCommand},
		{"negative queue limit", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdSetQueue, t0, SetQueue{Name: "q", MaxRunning: -1})
		}, ErrBadCommand},
		{"negative namespace share", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdSetNamespace, t0, SetNamespace{Namespace: Namespace{Name: "ns", Share: -1}})
		}, ErrBadCommand},
		{"namespace share above the maximum", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdSetNamespace, t0, SetNamespace{Namespace: Namespace{Name: "ns", Share: MaxShare + 1}})
		}, ErrBadCommand},
		{"empty cluster id", func(h *harness, _ uint64) []byte {
			return encodeCmd(t, CmdInit, t0, InitCluster{})
		}, ErrBadCommand},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tok := setup(h)
			before := h.hash()
			h.idx++
			r := h.f.Apply(rawEntry(h.idx, tc.data(h, tok))).(*Result)
			if !errors.Is(r.Err, tc.want) {
				t.Fatalf("err = %v, want %v", r.Err, tc.want)
			}
			if r.Index != h.idx || h.f.AppliedIndex() != h.idx {
				t.Errorf("index: result %d applied %d, want %d", r.Index, h.f.AppliedIndex(), h.idx)
			}
			if after := h.hash(); after != before {
				t.Errorf("refused entry changed the state")
			}
		})
	}
}

// TestApplyRedoAfterPartialWrite: an entry refused after its handler
// wrote is rolled back by re-running the batch; its neighbours survive.
func TestApplyRedoAfterPartialWrite(t *testing.T) {
	h := newHarness(t)
	h.submit("01J0")
	bad := h.idx + 2
	h.f.faultHook = func(idx uint64) error {
		if idx == bad {
			return ErrConflict
		}
		return nil
	}
	var logs []*raftLog
	for i := 1; i <= 3; i++ {
		logs = append(logs, rawEntry(h.idx+uint64(i), encodeCmd(t, CmdSubmitJobs, t0, SubmitJobs{Jobs: []NewJob{{ID: jobID(i), IdempotencyKey: jobID(i)}}})))
	}
	sub := h.f.Subscribe(16)
	out := h.f.ApplyBatch(logs)
	for i, want := range []error{nil, ErrConflict, nil} {
		if r := out[i].(*Result); !errors.Is(r.Err, want) || (want != nil && len(r.Jobs) != 0) {
			t.Errorf("entry %d: %+v, want err %v", i, r, want)
		}
	}
	if got := h.f.AppliedIndex(); got != logs[2].Index {
		t.Errorf("applied = %d, want %d", got, logs[2].Index)
	}
	err := h.f.View(func(tx *Tx) error {
		if _, err := tx.Job(jobID(2)); !errors.Is(err, ErrNotFound) {
			t.Errorf("refused entry's job exists (err %v)", err)
		}
		if _, ok := tx.JobIDByIdempotencyKey(jobID(2)); ok {
			t.Errorf("refused entry's idempotency key exists")
		}
		for _, i := range []int{1, 3} {
			if _, err := tx.Job(jobID(i)); err != nil {
				t.Errorf("job %d: %v", i, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Events of the refused entry are not published.
	for range 2 {
		if e := <-sub.C(); e.JobID == jobID(2) {
			t.Errorf("event for refused entry: %+v", e)
		}
	}
	select {
	case e := <-sub.C():
		t.Errorf("unexpected event %+v", e)
	default:
	}
	checkIndexes(t, h.f)
}
