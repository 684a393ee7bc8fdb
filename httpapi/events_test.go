package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// streamTimeout bounds every wait on a stream in these tests.
const streamTimeout = 10 * time.Second

// collect follows the stream until n events (resets included) arrived.
func collect(t *testing.T, a *testAPI, q api.EventQuery, n int, during func()) []fsm.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	defer cancel()
	got := make(chan fsm.Event, 1024)
	done := make(chan error, 1)
	go func() {
		done <- a.client.StreamEvents(ctx, q, func(ae api.Event) error {
			e, err := asServer[fsm.Event](ae, nil)
			if err != nil {
				return err
			}
			got <- *e
			return nil
		})
	}()
	waitFor(t, "the stream to open", func() bool { return a.srvSubscribers() == 1 })
	if during != nil {
		during()
	}
	var out []fsm.Event
	for len(out) < n {
		select {
		case e := <-got:
			out = append(out, e)
		case err := <-done:
			t.Fatalf("stream ended after %d of %d events: %v", len(out), n, err)
		case <-ctx.Done():
			t.Fatalf("only %d of %d events within %s: %v", len(out), n, streamTimeout, kindsOf(out))
		}
	}
	return out
}

func (a *testAPI) srvSubscribers() int {
	return a.srv.Config.Handler.(*server).subscribers.count()
}

func kindsOf(evs []fsm.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID().String()+" "+e.Kind()+" "+e.JobID)
	}
	return out
}

func TestEventStreamLiveAndResume(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "127.0.0.1:1", 1000, 1000)
	// Live: from now on.
	var j1 string
	live := collect(t, a, api.EventQuery{}, 1, func() { j1 = a.submit(`{"command":["true"]}`) })
	if live[0].Kind() != "job.submitted" || live[0].JobID != j1 {
		t.Fatalf("live stream: %v", kindsOf(live))
	}
	// Resume after the node event: the submit and a placement follow.
	a.place(j1, "n1")
	nodeEv := fsm.EventID{Index: live[0].Index - 1, Seq: fsm.SeqAll}
	resumed := collect(t, a, api.EventQuery{After: nodeEv.String()}, 3, nil)
	want := []string{"job.submitted", "attempt.placed", "job.running"}
	for i, e := range resumed {
		if e.Kind() != want[i] || e.JobID != j1 {
			t.Fatalf("resumed stream: %v, want %v", kindsOf(resumed), want)
		}
		if i > 0 && !resumed[i-1].ID().Less(e.ID()) {
			t.Errorf("out of order: %v", kindsOf(resumed))
		}
	}
	// Resuming mid-entry skips what was seen.
	mid := collect(t, a, api.EventQuery{After: resumed[1].ID().String()}, 1, nil)
	if mid[0].Kind() != "job.running" {
		t.Errorf("resume after %s: %v", resumed[1].ID(), kindsOf(mid))
	}
	// ?index= is the same as a bare Last-Event-ID.
	code, body := a.do("GET", "/v1/events?index=abc", "")
	if code != http.StatusBadRequest || !strings.Contains(body, "index") {
		t.Errorf("?index=abc: %d %s", code, body)
	}
}

func TestEventStreamFilters(t *testing.T) {
	a := newTestAPI(t)
	j1 := a.submit(`{"command":["true"]}`)
	j2 := a.submit(`{"command":["true"]}`)
	a.addNode("n1", "127.0.0.1:1", 1000, 1000)
	a.place(j2, "n1")
	from := "0"
	nodes := collect(t, a, api.EventQuery{Topics: []string{"node"}, After: from}, 1, nil)
	if nodes[0].Kind() != "node.joined" {
		t.Errorf("topic=node: %v", kindsOf(nodes))
	}
	jobs := collect(t, a, api.EventQuery{Job: j2, After: from}, 3, nil)
	for _, e := range jobs {
		if e.JobID != j2 {
			t.Errorf("job=%s gave %v", j2, kindsOf(jobs))
		}
	}
	_ = j1
	code, body := a.do("GET", "/v1/events?topic=job,bogus", "")
	if code != http.StatusBadRequest || !strings.Contains(body, `bogus`) || !strings.Contains(body, `"invalid"`) {
		t.Errorf("unknown topic: %d %s", code, body)
	}
	code, body = a.do("GET", "/v1/events", "", HeaderLastEventID, "x-1")
	if code != http.StatusBadRequest || !strings.Contains(body, HeaderLastEventID) {
		t.Errorf("bad Last-Event-ID: %d %s", code, body)
	}
}

// TestEventStreamReset: a reader further behind than the ring gets a
// reset naming where to resume, then live events.
func TestEventStreamReset(t *testing.T) {
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true, EventBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	a := newTestAPIOn(t, f, "n1", true)
	for range 6 {
		a.submit(`{"command":["true"]}`)
	}
	var j7 string
	evs := collect(t, a, api.EventQuery{After: "1"}, 2, func() { j7 = a.submit(`{"command":["true"]}`) })
	if evs[0].Type != fsm.EventReset || evs[0].Index != a.f.AppliedIndex()-1 || evs[1].JobID != j7 {
		t.Fatalf("behind the ring: %v", kindsOf(evs))
	}
}

// TestEventStreamSlowClient: a client that never reads does not slow
// Apply down.
func TestEventStreamSlowClient(t *testing.T) {
	a := newTestAPI(t) // the reader stays stuck (write timeout 10 s) while Apply goes on
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "the stream to open", func() bool { return a.srvSubscribers() == 1 })
	// Enough events to fill the socket buffers many times over; each
	// submit must return promptly whatever the reader does.
	big := strings.Repeat("x", 4000) // 3000 × 4 KB: well over loopback's socket buffers
	applies := func(prefix string) time.Duration {
		start := time.Now()
		for i := 0; i < 3000; i++ {
			id := fmt.Sprintf("01%s%05d", prefix, i)
			a.cluster.must(fsm.CmdSubmitJobs, fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: id, Spec: fsm.JobSpec{Command: []string{"true"}}}}})
			a.cluster.must(fsm.CmdCancelJob, fsm.CancelJob{JobID: id, Reason: big})
		}
		return time.Since(start)
	}
	stuck := applies("SLOW")
	conn.Close()
	waitFor(t, "the closed stream to end", func() bool { return a.srvSubscribers() == 0 })
	free := applies("FREE")
	// Generous: the machine is shared; a blocked Apply would take forever.
	if stuck > 3*free+2*time.Second {
		t.Errorf("6000 applies took %s with a stuck reader, %s with none", stuck, free)
	}
}

// TestEventStreamStuckReaderDropped: a reader that never reads is dropped
// after EventWriteTimeout.
func TestEventStreamStuckReaderDropped(t *testing.T) {
	a := newTestAPI(t, func(c *Config) { c.EventWriteTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "the stream to open", func() bool { return a.srvSubscribers() == 1 })
	big := strings.Repeat("x", 4000)
	for i := 0; i < 3000; i++ {
		id := fmt.Sprintf("01SLOW%05d", i)
		a.cluster.must(fsm.CmdSubmitJobs, fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: id, Spec: fsm.JobSpec{Command: []string{"true"}}}}})
		a.cluster.must(fsm.CmdCancelJob, fsm.CancelJob{JobID: id, Reason: big})
	}
	waitFor(t, "the stuck stream to be dropped", func() bool { return a.srvSubscribers() == 0 })
}

func TestEventStreamHeartbeat(t *testing.T) {
	a := newTestAPI(t, func(c *Config) { c.EventHeartbeat = 50 * time.Millisecond })
	resp, err := http.Get(a.srv.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	deadline := time.AfterFunc(streamTimeout, func() { resp.Body.Close() })
	defer deadline.Stop()
	for sc.Scan() {
		if sc.Text() == ": heartbeat" {
			return
		}
	}
	t.Fatalf("no heartbeat: %v", sc.Err())
}

func TestJobTimelineEndpoint(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "127.0.0.1:1", 1000, 1000)
	j := a.submit(`{"command":["true"]}`)
	a.place(j, "n1")
	tl, err := asServer[[]fsm.Event](a.client.JobEvents(context.Background(), j))
	if err != nil {
		t.Fatal(err)
	}
	evs := *tl
	if got := kindsOf(evs); len(got) != 3 || evs[0].Kind() != "job.submitted" || evs[1].Kind() != "attempt.placed" || evs[1].Node != "n1" || evs[1].At.IsZero() {
		t.Errorf("timeline: %v", got)
	}
	if code, body := a.do("GET", "/v1/jobs/nope/events", ""); code != http.StatusNotFound {
		t.Errorf("unknown job: %d %s", code, body)
	}
}

func TestRequestID(t *testing.T) {
	a := newTestAPI(t)
	resp, err := http.Get(a.srv.URL + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if id := resp.Header.Get(HeaderRequestID); len(id) < 16 {
		t.Errorf("made-up request ID %q", id)
	}
	req, _ := http.NewRequest("GET", a.srv.URL+"/v1/jobs/nope", nil)
	req.Header.Set(HeaderRequestID, "abc-123")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ids := resp.Header.Values(HeaderRequestID); len(ids) != 1 || ids[0] != "abc-123" {
		t.Errorf("request ID %q, want the client's", ids)
	}
}

func TestMetricsLint(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "127.0.0.1:1", 1000, 1000)
	a.cluster.must(fsm.CmdNodeGPUs, fsm.NodeGPUs{Name: "n1", GPUs: []fsm.GPU{
		{UUID: "GPU-aaaaaaaa", Index: 0, Model: "NVIDIA H100"}, {UUID: "GPU-bbbbbbbb", Index: 1, Model: "NVIDIA H100", Health: "xid 79"}}})
	j := a.submit(`{"command":["true"],"queue":"batch"}`)
	a.place(j, "n1")
	a.submit(`{"command":["true"],"namespace":"team","allow_unplaceable":true}`)
	code, body := a.do("GET", "/v1/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("metrics: %d %s", code, body)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, want := range []string{
		`foreman_jobs{state="running"} 1`,
		`foreman_queue_jobs{queue="batch",state="running"} 1`,
		`foreman_node_allocated{node="n1",resource="cpu"}`,
		`foreman_node_capacity{node="n1",resource="cpu"} 1000`,
		`foreman_gpu_healthy{index="0",model="NVIDIA H100",node="n1",uuid="GPU-aaaaaaaa"} 1`,
		`foreman_gpu_healthy{index="1",model="NVIDIA H100",node="n1",uuid="GPU-bbbbbbbb"} 0`,
		`foreman_jobs_submitted_total{namespace="default"} 1`,
		`foreman_namespace_jobs{namespace="default",state="running"} 1`,
		`foreman_namespace_jobs{namespace="team",state="queued"} 1`,
		`foreman_attempts_total{namespace="default",outcome="failed"} 0`,
		`foreman_event_subscribers 0`,
		`foreman_raft_state{state="leader"} 1`,
		`foreman_http_requests_total{code="201",method="POST",route="/v1/jobs"} 2`,
		`foreman_job_place_latency_seconds_bucket`,
		`go_goroutines`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestWaitJob(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "127.0.0.1:1", 1000, 1000)
	j := a.submit(`{"command":["true"]}`)
	type result struct {
		d   *JobDetail
		err error
	}
	done := make(chan result, 1)
	var seen []string
	go func() {
		d, err := asServer[JobDetail](a.client.WaitJob(context.Background(), j, func(e api.Event) { seen = append(seen, e.Type) }))
		done <- result{d, err}
	}()
	waitFor(t, "the wait's stream", func() bool { return a.srvSubscribers() == 1 })
	tok := a.place(j, "n1")
	select {
	case r := <-done:
		t.Fatalf("returned before the job finished: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	a.cluster.must(fsm.CmdReport, fsm.ReportAttempt{JobID: j, Attempt: 1, FencingToken: tok, Node: "n1", State: fsm.AttemptSucceeded})
	select {
	case r := <-done:
		if r.err != nil || r.d.Job.State != fsm.JobSucceeded {
			t.Fatalf("WaitJob: %+v, %v", r.d, r.err)
		}
	case <-time.After(streamTimeout):
		t.Fatal("WaitJob did not return")
	}
	if len(seen) != 4 || seen[3] != "job.succeeded" {
		t.Errorf("events seen: %v", seen)
	}
	// Already finished: the first read answers.
	d, err := a.client.WaitJob(context.Background(), j, nil)
	if err != nil || d.Job.State != api.JobSucceeded {
		t.Errorf("WaitJob of a finished job: %+v, %v", d, err)
	}
}
