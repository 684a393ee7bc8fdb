package fsm

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDeliveryBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {12, 2048 * time.Second}, {13, time.Hour}, {50, time.Hour}} {
		if got := DeliveryBackoff(tc.n); got != tc.want {
			t.Errorf("DeliveryBackoff(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// submitNotified submits a job with hooks and runs it to exit code 3 on n1
// (failed: one attempt), returning the harness.
func notifiedJob(t *testing.T, hooks ...Webhook) (*harness, string) {
	h := newHarness(t)
	const id = "01NOTIFY"
	h.addNode("n1")
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: id, Spec: JobSpec{MaxAttempts: 1, Notify: hooks}}}})
	tok := h.place(id, "n1")
	h.must(CmdReport, ReportAttempt{JobID: id, Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptRunning})
	h.now = h.now.Add(time.Second)
	h.must(CmdReport, ReportAttempt{JobID: id, Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptFailed, ExitCode: intp(3), Reason: "exit code 3"})
	return h, id
}

func (h *harness) deliveries(id string) []Delivery {
	h.t.Helper()
	var out []Delivery
	if err := h.f.View(func(tx *Tx) error {
		var err error
		out, err = tx.Deliveries(id)
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) due(now time.Time) ([]Delivery, time.Time) {
	h.t.Helper()
	var out []Delivery
	var next time.Time
	if err := h.f.View(func(tx *Tx) error {
		var err error
		out, next, err = tx.DueDeliveries(now, 100, nil)
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return out, next
}

// TestDeliveryRecords: a terminal transition writes one pending delivery
// per matching hook (with the event as of that entry), none for hooks that
// do not ask; the running transition matches only a hook that asks for it.
func TestDeliveryRecords(t *testing.T) {
	h, id := notifiedJob(t,
		Webhook{URL: "http://a/hook", Events: []string{EventFinished}, Secret: "s"},
		Webhook{URL: "http://b/hook", Events: []string{"succeeded"}},
		Webhook{URL: "http://c/hook", Events: []string{"running", "failed"}, MaxAttempts: 3},
	)
	ds := h.deliveries(id)
	if len(ds) != 3 {
		t.Fatalf("deliveries = %+v, want a/failed, c/running, c/failed", ds)
	}
	byHook := map[string]Delivery{}
	for _, d := range ds {
		byHook[d.URL+" "+string(d.Event.State)] = d
	}
	fin, ok := byHook["http://a/hook failed"]
	if !ok || byHook["http://c/hook running"].ID == "" || byHook["http://c/hook failed"].ID == "" {
		t.Fatalf("deliveries = %+v", ds)
	}
	j := h.job(id)
	if fin.State != DeliveryPending || fin.Attempts != 0 || fin.MaxAttempts != DefaultDeliveryAttempts ||
		!fin.NextAt.Equal(j.FinishedAt) || fin.Event.Index != j.ModifyIndex || fin.Event.ID != eventID(j.ModifyIndex, fin.Event.Seq) ||
		fin.Event.Type != "job.failed" || fin.Event.Attempt != 1 || fin.Event.ExitCode == nil || *fin.Event.ExitCode != 3 ||
		!fin.Event.At.Equal(j.FinishedAt) {
		t.Errorf("finished delivery = %+v (job %+v)", fin, j)
	}
	if c := byHook["http://c/hook failed"]; c.MaxAttempts != 3 || c.Event.ID != fin.Event.ID {
		t.Errorf("hook c's failed delivery = %+v, want max 3 and the same event ID", c)
	}
	due, next := h.due(h.now)
	if len(due) != 3 || !next.IsZero() {
		t.Errorf("due now = %d (next %v), want all 3", len(due), next)
	}
}

// TestDeliveryOutcomes: failed tries back off and end in failed after
// MaxAttempts; a 2xx ends in delivered; a stale or duplicate outcome (a
// deposed leader's) is skipped and changes nothing.
func TestDeliveryOutcomes(t *testing.T) {
	h, id := notifiedJob(t, Webhook{URL: "http://a/", Events: []string{EventFinished}, MaxAttempts: 3},
		Webhook{URL: "http://b/", Events: []string{"failed"}})
	ds := h.deliveries(id)
	a, b := ds[0], ds[1]
	if a.Hook != 0 || b.Hook != 1 {
		t.Fatalf("deliveries = %+v", ds)
	}
	for n := 1; n <= 3; n++ {
		h.now = h.now.Add(time.Minute)
		r := h.must(CmdDeliveries, DeliveryOutcomes{Outcomes: []DeliveryOutcome{{ID: a.ID, Attempt: n, Status: 500, Error: "HTTP 500"}}})
		if len(r.Skipped) != 0 {
			t.Fatalf("try %d skipped: %v", n, r.Skipped)
		}
		d := h.deliveries(id)[0]
		want := DeliveryPending
		if n == 3 {
			want = DeliveryFailed
		}
		if d.State != want || d.Attempts != n || d.LastStatus != 500 || d.LastError != "HTTP 500" {
			t.Fatalf("after try %d: %+v", n, d)
		}
		if n < 3 && !d.NextAt.Equal(h.now.Add(DeliveryBackoff(n))) {
			t.Errorf("after try %d: next %v, want %v", n, d.NextAt, h.now.Add(DeliveryBackoff(n)))
		}
	}
	// Stale: a repeated try number, and any outcome for a finished delivery.
	before := h.hash()
	r := h.must(CmdDeliveries, DeliveryOutcomes{Outcomes: []DeliveryOutcome{
		{ID: a.ID, Attempt: 4, Delivered: true}, {ID: b.ID, Attempt: 2, Delivered: true}, {ID: "nope/1/2", Attempt: 1},
	}})
	if len(r.Skipped) != 3 {
		t.Errorf("skipped = %v, want all three", r.Skipped)
	}
	if h.hash() != before {
		t.Errorf("stale outcomes changed the state")
	}
	h.must(CmdDeliveries, DeliveryOutcomes{Outcomes: []DeliveryOutcome{{ID: b.ID, Attempt: 1, Delivered: true, Status: 204}}})
	if d := h.deliveries(id)[1]; d.State != DeliveryDelivered || d.LastStatus != 204 || !d.NextAt.IsZero() {
		t.Errorf("delivered = %+v", d)
	}
	// Both ends are in the job's timeline (the tries in between are not).
	var tl []Event
	h.f.View(func(tx *Tx) error {
		var err error
		tl, err = tx.JobEvents(id)
		return err
	})
	var ends []string
	for _, e := range tl {
		if e.Type == EventWebhook {
			ends = append(ends, e.Kind()+" "+e.Reason)
		}
	}
	if want := []string{"webhook.failed job.failed to http://a/ after 3 tries: HTTP 500", "webhook.delivered job.failed to http://b/: HTTP 204"}; strings.Join(ends, "|") != strings.Join(want, "|") {
		t.Errorf("timeline webhook events %q, want %q", ends, want)
	}
	if due, next := h.due(h.now.Add(48 * time.Hour)); len(due) != 0 || !next.IsZero() {
		t.Errorf("due after both ended = %+v (next %v)", due, next)
	}
}

// TestDeliveryMaxAge: a delivery whose next try would fall after
// DeliveryMaxAge fails instead; a long error is cut.
func TestDeliveryMaxAge(t *testing.T) {
	h, id := notifiedJob(t, Webhook{URL: "http://a/", Events: []string{EventFinished}})
	d := h.deliveries(id)[0]
	h.now = d.CreatedAt.Add(DeliveryMaxAge - time.Second/2)
	h.must(CmdDeliveries, DeliveryOutcomes{Outcomes: []DeliveryOutcome{{ID: d.ID, Attempt: 1, Error: strings.Repeat("x", 5000)}}})
	d = h.deliveries(id)[0]
	if d.State != DeliveryFailed || len(d.LastError) != maxDeliveryError {
		t.Errorf("delivery = %+v (error %d bytes)", d.State, len(d.LastError))
	}
}

// TestDeliveriesDeterministic: two FSMs applying the same log agree
// byte for byte; GC drops a job's deliveries with it; a state without
// webhooks has no delivery buckets (its hash is as before they existed).
func TestDeliveriesDeterministic(t *testing.T) {
	run := func() *harness {
		h, id := notifiedJob(t, Webhook{URL: "http://a/", Events: []string{EventFinished}},
			Webhook{URL: "http://b/", Events: []string{"running"}})
		d := h.deliveries(id)
		h.must(CmdDeliveries, DeliveryOutcomes{Outcomes: []DeliveryOutcome{{ID: d[0].ID, Attempt: 1, Status: 503}}})
		return h
	}
	h1, h2 := run(), run()
	if h1.hash() != h2.hash() {
		t.Fatal("state hashes differ")
	}
	h1.now = h1.now.Add(time.Hour)
	h1.must(CmdGC, GC{Before: h1.now})
	if ds := h1.deliveries("01NOTIFY"); len(ds) != 0 {
		t.Errorf("deliveries after GC = %+v", ds)
	}
	if due, _ := h1.due(h1.now.Add(48 * time.Hour)); len(due) != 0 {
		t.Errorf("due after GC = %+v", due)
	}
	plain := newHarness(t)
	plain.submit("01PLAIN")
	plain.must(CmdDeliveries, DeliveryOutcomes{Outcomes: []DeliveryOutcome{{ID: "x", Attempt: 1}}})
	if err := plain.f.View(func(tx *Tx) error {
		if tx.tx.Bucket(bucketDeliveries) != nil || tx.tx.Bucket(bucketDeliveriesDue) != nil {
			t.Error("delivery buckets exist without any webhook")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDeliveryEventIDMatchesEvents: a delivery's event ID "<index>-<seq>"
// names the job event Apply published for the transition: the seq-th
// event of that entry.
func TestDeliveryEventIDMatchesEvents(t *testing.T) {
	h := newHarness(t)
	sub := h.f.Subscribe(1000)
	const id = "01EVID"
	h.addNode("n1")
	h.submit("01OTHER")
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: id, Spec: JobSpec{MaxAttempts: 1,
		Notify: []Webhook{{URL: "http://a/", Events: []string{"running", EventFinished}}}}}}})
	tok := h.place(id, "n1")
	h.must(CmdReportBatch, ReportAttempts{Reports: []ReportAttempt{
		{JobID: id, Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptRunning},
		{JobID: id, Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptSucceeded, ExitCode: intp(0)},
	}})
	ds := h.deliveries(id)
	if len(ds) != 2 {
		t.Fatalf("deliveries %+v", ds)
	}
	byIndex := map[uint64][]Event{}
	for len(sub.C()) > 0 {
		e := <-sub.C()
		byIndex[e.Index] = append(byIndex[e.Index], e)
	}
	for _, d := range ds {
		evs := byIndex[d.Event.Index]
		if d.Event.Seq >= len(evs) {
			t.Fatalf("delivery %s: seq %d, entry has %d events", d.ID, d.Event.Seq, len(evs))
		}
		e := evs[d.Event.Seq]
		if e.Type != EventJob || e.JobID != id || e.State != string(d.Event.State) || d.Event.ID != e.ID().String() ||
			d.Event.Type != e.Kind() || d.Event.ID != fmt.Sprintf("%d-%d", d.Event.Index, d.Event.Seq) {
			t.Errorf("delivery %s (event %+v) names event %+v", d.ID, d.Event, e)
		}
	}
}
