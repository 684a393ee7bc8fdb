package sched

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// TestSign: the signature format, on the example GitHub documents for the
// same scheme (so receivers' existing verifiers work).
func TestSign(t *testing.T) {
	body := []byte("Hello, World!")
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got := Sign("It's a Secret to Everybody", body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	if !VerifySignature("It's a Secret to Everybody", body, want) || VerifySignature("other", body, want) ||
		VerifySignature("It's a Secret to Everybody", []byte("Hello, World?"), want) {
		t.Error("VerifySignature accepts a wrong secret or body, or refuses the right one")
	}
}

// receiver is a webhook endpoint that records what it got and answers
// with the status its answer function picks (0: hang until the request
// is abandoned).
type receiver struct {
	mu     sync.Mutex
	got    []received
	answer func(n int) int
	srv    *httptest.Server
}

type received struct {
	event          fsm.WebhookEvent
	id, sig, tryNo string
	body           []byte
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev fsm.WebhookEvent
		json.Unmarshal(body, &ev)
		r.mu.Lock()
		r.got = append(r.got, received{event: ev, id: req.Header.Get(HeaderEventID), sig: req.Header.Get(HeaderSignature),
			tryNo: req.Header.Get(HeaderDeliveryAttempt), body: body})
		n := len(r.got)
		r.mu.Unlock()
		code := r.answer(n)
		if code == 0 {
			<-req.Context().Done()
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

type deliveryRig struct {
	t  *testing.T
	f  *fsm.FSM
	r  *fakeRaft
	id string
}

// newDeliveryRig runs one job with hooks to its end (succeeded) on a
// real FSM.
func newDeliveryRig(t *testing.T, hooks ...fsm.Webhook) *deliveryRig {
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	g := &deliveryRig{t: t, f: f, r: &fakeRaft{t: t, f: f}, id: "01DELIVER"}
	g.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: "n1", Capacity: fsm.Resources{CPU: 1000, MemoryMB: 1000}}})
	g.must(fsm.CmdSubmitJobs, fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: g.id, Spec: fsm.JobSpec{MaxAttempts: 1, Notify: hooks}}}})
	res := g.must(fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: g.id, Node: "n1"}}})
	zero := 0
	g.must(fsm.CmdReport, fsm.ReportAttempt{JobID: g.id, Attempt: 1, FencingToken: res.Index, Node: "n1", State: fsm.AttemptSucceeded, ExitCode: &zero})
	return g
}

func (g *deliveryRig) must(typ fsm.CommandType, payload any) *fsm.Result {
	g.t.Helper()
	res, err := g.r.Apply(context.Background(), mustCommand(typ, time.Now(), payload))
	if err == nil {
		err = res.Err
	}
	if err != nil || len(res.Skipped) > 0 {
		g.t.Fatalf("%s: %v %v", typ, err, res.Skipped)
	}
	return res
}

func (g *deliveryRig) deliveries() []fsm.Delivery {
	var out []fsm.Delivery
	g.f.View(func(tx *fsm.Tx) error {
		var err error
		out, err = tx.Deliveries(g.id)
		return err
	})
	return out
}

// start runs a deliverer (as a leader would) until the returned stop.
func (g *deliveryRig) start(timeout time.Duration) (stop func()) {
	cfg := DefaultConfig()
	cfg.DeliveryTimeout = timeout
	s, err := New(cfg, Deps{Raft: g.r, State: g.f}, slog.New(slog.DiscardHandler))
	if err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		newDeliverer(s).run(ctx)
	}()
	return func() { cancel(); <-done }
}

func (g *deliveryRig) waitFor(what string, cond func([]fsm.Delivery) bool) []fsm.Delivery {
	g.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds := g.deliveries()
		if cond(ds) {
			return ds
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("timed out waiting for %s: %+v", what, ds)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ended(ds []fsm.Delivery) bool {
	for _, d := range ds {
		if d.State == fsm.DeliveryPending {
			return false
		}
	}
	return len(ds) > 0
}

// TestDeliverer: a receiver answering 500 twice gets the event a third
// time and the delivery is recorded delivered after 3 tries, with the same
// event ID and a valid signature on each; one that hangs fails after its
// max_attempts, each try cut at the timeout; neither holds up the third.
func TestDeliverer(t *testing.T) {
	flaky := newReceiver(t, func(n int) int {
		if n <= 2 {
			return 500
		}
		return 200
	})
	hung := newReceiver(t, func(int) int { return 0 })
	good := newReceiver(t, func(int) int { return 204 })
	g := newDeliveryRig(t,
		fsm.Webhook{URL: flaky.srv.URL, Events: []string{fsm.EventFinished}, Secret: "k1"},
		fsm.Webhook{URL: hung.srv.URL, Events: []string{"succeeded"}, MaxAttempts: 2},
		fsm.Webhook{URL: good.srv.URL + "/x", Events: []string{"succeeded", "failed"}},
	)
	stop := g.start(300 * time.Millisecond)
	defer stop()
	started := time.Now()
	g.waitFor("the good receiver's delivery", func(ds []fsm.Delivery) bool { return len(ds) == 3 && ds[2].State == fsm.DeliveryDelivered })
	if el := time.Since(started); el > 2*time.Second {
		t.Errorf("the good receiver waited %v (behind the hung one?)", el)
	}
	ds := g.waitFor("every delivery to end", ended)
	if d := ds[0]; d.State != fsm.DeliveryDelivered || d.Attempts != 3 || d.LastStatus != 200 || d.LastError != "" {
		t.Errorf("flaky receiver's delivery %+v", d)
	}
	if d := ds[1]; d.State != fsm.DeliveryFailed || d.Attempts != 2 || d.LastStatus != 0 || d.LastError == "" {
		t.Errorf("hung receiver's delivery %+v", d)
	}
	if d := ds[2]; d.Attempts != 1 || d.LastStatus != 204 {
		t.Errorf("good receiver's delivery %+v", d)
	}
	got := flaky.requests()
	if len(got) != 3 {
		t.Fatalf("flaky receiver got %d requests, want 3", len(got))
	}
	for i, r := range got {
		if r.id != ds[0].Event.ID || r.event.ID != r.id || r.event.JobID != g.id || r.event.State != fsm.JobSucceeded || r.event.Type != "job.succeeded" {
			t.Errorf("request %d: header ID %q, event %+v", i, r.id, r.event)
		}
		if !VerifySignature("k1", r.body, r.sig) || r.tryNo != string(rune('1'+i)) {
			t.Errorf("request %d: signature %q try %q", i, r.sig, r.tryNo)
		}
	}
	if g := good.requests(); len(g) != 1 || g[0].sig != "" {
		t.Errorf("good receiver: %d requests, signature %q (want one, unsigned)", len(g), g[0].sig)
	}
}

// TestDelivererFailover: a try cut short by the end of leadership leaves
// the delivery pending; the next leader's deliverer delivers it, with the
// same event ID (at least once).
func TestDelivererFailover(t *testing.T) {
	first := make(chan struct{})
	recv := newReceiver(t, func(n int) int {
		if n == 1 {
			close(first)
			return 0 // hang: the old leader never hears back
		}
		return 200
	})
	g := newDeliveryRig(t, fsm.Webhook{URL: recv.srv.URL, Events: []string{fsm.EventFinished}})
	stop := g.start(time.Minute)
	select {
	case <-first:
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery tried")
	}
	stop() // leadership lost mid-try
	if d := g.deliveries()[0]; d.State != fsm.DeliveryPending || d.Attempts != 0 {
		t.Fatalf("after the old leader stopped: %+v", d)
	}
	stop = g.start(time.Minute)
	defer stop()
	ds := g.waitFor("delivered by the new leader", ended)
	got := recv.requests()
	if ds[0].State != fsm.DeliveryDelivered || len(got) != 2 || got[0].id != got[1].id || got[1].id != ds[0].Event.ID {
		t.Errorf("delivery %+v, requests %+v", ds[0], got)
	}
}

// BenchmarkDeliverer: webhook deliveries per second from one deliverer to
// a local receiver that answers 204 at once, each outcome committed to a
// real FSM (no raft replication: the figure is the deliverer's and Apply's
// cost, an upper bound for a cluster).
func BenchmarkDeliverer(b *testing.B) {
	const jobs = 2000
	for range b.N {
		b.StopTimer()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}))
		f, err := fsm.Open(filepath.Join(b.TempDir(), "state.db"), fsm.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		r := &fakeRaft{t: b, f: f}
		apply := func(typ fsm.CommandType, payload any) *fsm.Result {
			res, err := r.Apply(context.Background(), mustCommand(typ, time.Now(), payload))
			if err != nil || res.Err != nil {
				b.Fatal(err, res.Err)
			}
			return res
		}
		apply(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: "n1", Capacity: fsm.Resources{CPU: 1000, MemoryMB: 1000}}})
		hook := []fsm.Webhook{{URL: srv.URL, Events: []string{fsm.EventFinished}, Secret: "s"}}
		var nj []fsm.NewJob
		for i := range jobs {
			nj = append(nj, fsm.NewJob{ID: fmt.Sprintf("01BENCH%08d", i), Spec: fsm.JobSpec{MaxAttempts: 1, Notify: hook}})
		}
		apply(fsm.CmdSubmitJobs, fsm.SubmitJobs{Jobs: nj})
		var ids []string
		for _, j := range nj {
			ids = append(ids, j.ID)
		}
		apply(fsm.CmdFailJobs, fsm.FailJobs{JobIDs: ids, Reason: "bench"})
		cfg := DefaultConfig()
		s, _ := New(cfg, Deps{Raft: r, State: f}, slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		b.StartTimer()
		start := time.Now()
		go func() {
			defer close(done)
			newDeliverer(s).run(ctx)
		}()
		for {
			var due []fsm.Delivery
			f.View(func(tx *fsm.Tx) error {
				due, _, _ = tx.DueDeliveries(time.Now().Add(time.Hour), 1, nil)
				return nil
			})
			if len(due) == 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		el := time.Since(start)
		b.StopTimer()
		cancel()
		<-done
		srv.Close()
		f.Close()
		b.ReportMetric(float64(jobs)/el.Seconds(), "deliveries/s")
		b.StartTimer()
	}
}
