package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

// testWork is a WorkSource over one node's FSM: "job/num/state" per live
// attempt.
type testWork struct {
	mu sync.Mutex
	f  *fsm.FSM
}

func (w *testWork) NodeWork(node string) (any, error) {
	w.mu.Lock()
	f := w.f
	w.mu.Unlock()
	out := []string{}
	err := f.View(func(tx *fsm.Tx) error {
		return tx.LiveAttemptsOnNode(node, func(a *fsm.Attempt) bool {
			out = append(out, fmt.Sprintf("%s/%d/%s", a.JobID, a.Num, a.State))
			return true
		})
	})
	if strings.HasPrefix(node, "stuck-") { // frames big enough to fill a socket's buffers
		return map[string]any{"work": out, "pad": strings.Repeat("x", 1<<20)}, err
	}
	return out, err
}

// workCluster is a 3-node cluster whose nodes serve work streams.
func workCluster(t *testing.T, limits cluster.WorkStreamLimits, clients ...cluster.ClientLimits) *clustertest.Cluster {
	t.Helper()
	srcs := []*testWork{{}, {}, {}}
	c := clustertest.NewCluster(t, 3, clustertest.Options{Configure: func(i int, cfg *cluster.Config) {
		cfg.Work, cfg.WorkStreams = srcs[i], limits
		if len(clients) > 0 {
			cfg.Clients = clients[0]
		}
	}})
	for i, s := range srcs {
		s.mu.Lock()
		s.f = c.Node(i).FSM
		s.mu.Unlock()
	}
	leader := c.WaitForLeader()
	c.Eventually(clustertest.ConvergeTimeout, "every node recorded", func() error {
		for _, nd := range c.Nodes() {
			if _, err := nodeRecord(leader, nd.Name); err != nil {
				return err
			}
		}
		return nil
	})
	return c
}

// workStream is an open stream's frames.
type workStream struct {
	frames chan cluster.WorkFrame
	resp   *http.Response
	// stopBeats makes the client fall silent (its connection stays open)
	// and returns when its last beat began.
	stopBeats func() time.Time
	paused    *atomic.Bool // while set, the client skips its beats
	leave     func()       // the client says leave (it is stopping)
}

// openWork opens a client's stream: its hello names node (a client at a
// made-up address), then it beats every 100 ms. A server that is not
// ready (503: no leader contact yet, or catching up) is asked again for up to
// clustertest.ConvergeTimeout (a loaded machine), as a client would.
func openWork(t *testing.T, via *clustertest.Node, node string, index uint64) (*workStream, *http.Response) {
	t.Helper()
	return openWorkEvery(t, via, node, index, 0)
}

// openWorkEvery is openWork with beats that announce everyMS (an idle
// client's longer interval), though they still come every 100 ms.
func openWorkEvery(t *testing.T, via *clustertest.Node, node string, index uint64, everyMS int64) (*workStream, *http.Response) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d%swork/%s?index=%d", via.Port, cluster.InternalPrefix, node, index)
	var resp *http.Response
	var stop func() time.Time
	var paused *atomic.Bool
	var leaveCh chan struct{}
	for deadline := time.Now().Add(clustertest.ConvergeTimeout); ; {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		paused = &atomic.Bool{}
		leaveCh = make(chan struct{})
		up, lastBeat := upFrames(ctx, t, node, everyMS, paused, leaveCh)
		stop = sync.OnceValue(func() time.Time {
			cancel()
			return <-lastBeat
		})
		req, _ := http.NewRequest(http.MethodPost, url, up)
		var err error
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		resp.Body.Close()
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp
	}
	ws := &workStream{frames: make(chan cluster.WorkFrame, 64), resp: resp, stopBeats: stop, paused: paused,
		leave: sync.OnceFunc(func() { close(leaveCh) })}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(ws.frames)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var f cluster.WorkFrame
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Errorf("bad frame %q: %v", sc.Text(), err)
				return
			}
			ws.frames <- f
		}
	}()
	return ws, resp
}

// upFrames is a client's request body: its hello, then a beat every 100
// ms until ctx ends (the body then stays open and silent). Once the beats
// have ended, lastBeat gives the time the last one began to be written:
// a server cannot have heard the client after that, which is what a test
// bounding "dead after its last beat" from below must measure from.
func upFrames(ctx context.Context, t *testing.T, node string, everyMS int64, paused *atomic.Bool, leave <-chan struct{}) (body io.Reader, lastBeat <-chan time.Time) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	last := make(chan time.Time, 1)
	go func() {
		var began time.Time
		defer func() { last <- began }()
		enc := json.NewEncoder(pw)
		self := fsm.Node{Name: node, HTTPAddr: "127.0.0.1:1", Capacity: fsm.Resources{CPU: 1000, MemoryMB: 1024}}
		if enc.Encode(cluster.UpFrame{Type: cluster.UpFrameHello, Node: &self}) != nil {
			return
		}
		for seq := uint64(1); ; seq++ {
			if paused.Load() {
				seq--
			} else if began = time.Now(); enc.Encode(cluster.UpFrame{Type: cluster.UpFrameBeat, Seq: seq, EveryMS: everyMS}) != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-leave:
				_ = enc.Encode(cluster.UpFrame{Type: cluster.UpFrameLeave})
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return pr, last
}

// nextWork returns the stream's next work frame's attempts, failing on a
// closed stream or after timeout. pings counts the pings before it.
func (ws *workStream) nextWork(t *testing.T, timeout time.Duration) (f cluster.WorkFrame, work []string, pings int) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case f, ok := <-ws.frames:
			if !ok {
				t.Fatal("the work stream ended")
			}
			if f.Type == cluster.WorkFramePing {
				pings++
				continue
			}
			if err := json.Unmarshal(f.Work, &work); err != nil {
				t.Fatal(err)
			}
			return f, work, pings
		case <-deadline:
			t.Fatalf("no work frame within %s", timeout)
		}
	}
}

// A client's stream from a follower: the node's whole live set first,
// again after each change to it, never for another node's changes, with
// pings saying the server is in contact with the leader; a client that
// saw a later index (from another server) waits for this one to catch up.
func TestWorkStreamDeliversOnlyItsNode(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond})
	leader := c.WaitForLeader()
	via := c.Followers()[0]
	target, other := "client-1", leader.Name // other: a raft member, no stream
	ws, resp := openWork(t, via, target, leader.FSM.AppliedIndex())
	if ws == nil {
		t.Fatalf("open: %s", resp.Status)
	}
	f, work, _ := ws.nextWork(t, 5*time.Second)
	if len(work) != 0 || !f.LeaderContact {
		t.Fatalf("first frame %+v %v: want an empty set, in contact with the leader", f, work)
	}

	wakes := via.WorkWakeups()
	ids := []string{submit(t, leader), submit(t, leader)}
	apply(t, leader, fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: ids[0], Node: other}}})
	placed := apply(t, leader, fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: ids[1], Node: target}}})
	f, work, pings := ws.nextWork(t, 5*time.Second)
	if want := []string{ids[1] + "/1/assigned"}; !slices.Equal(work, want) || f.Index < placed.Index {
		t.Fatalf("after the placement (index %d): frame index %d, work %v; want %v", placed.Index, f.Index, work, want)
	}
	// The placement on the other node woke nothing here: one wake-up for
	// the target's placement (the other node has no stream).
	c.Eventually(5*time.Second, "the waker caught up", func() error {
		if got := via.WorkWakeups() - wakes; got != 1 {
			return fmt.Errorf("%d wake-ups for one placement on %s and one on %s, want 1", got, target, other)
		}
		return nil
	})
	t.Logf("work frame after %d pings", pings)

	apply(t, leader, fsm.CmdReport, fsm.ReportAttempt{JobID: ids[1], Attempt: 1, FencingToken: placed.Index, Node: target,
		State: fsm.AttemptRunning, StartedAt: time.Now()})
	if f, work, _ = ws.nextWork(t, 5*time.Second); !slices.Equal(work, []string{ids[1] + "/1/running"}) {
		t.Fatalf("after the start: %v", work)
	}

	// Resume on another server with the index seen: never older.
	other2 := c.Followers()[1]
	if other2.Name == via.Name {
		other2 = c.Followers()[0]
	}
	ws2, resp := openWork(t, other2, target, f.Index)
	if ws2 == nil {
		t.Fatalf("resume: %s", resp.Status)
	}
	if f2, work, _ := ws2.nextWork(t, 5*time.Second); f2.Index < f.Index || !slices.Equal(work, []string{ids[1] + "/1/running"}) {
		t.Fatalf("resumed frame index %d (had %d), work %v", f2.Index, f.Index, work)
	}
}

// Bad requests change nothing and say why: an index that is not a number,
// a first frame that is no hello, a hello naming another node or a raft
// member, an index no server has reached, too many new streams.
func TestWorkStreamRefusals(t *testing.T) {
	// A read timeout longer than the refusal's deadline below: a server
	// that read a refused stream's body before answering would miss it.
	c := workCluster(t, cluster.WorkStreamLimits{CatchUp: 300 * time.Millisecond, NewPerSecond: 1},
		cluster.ClientLimits{ReadTimeout: time.Minute})
	leader := c.WaitForLeader()
	// A server answers 503 while it applies what it committed (the
	// cluster's own records settling): a client asks again, and so do we.
	post := func(via *clustertest.Node, path, body string) (int, string, http.Header) {
		for deadline := time.Now().Add(clustertest.ConvergeTimeout); ; {
			resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d%s%s", via.Port, cluster.InternalPrefix, path), "application/x-ndjson", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var body2 struct{ Error, Code string }
			_ = json.NewDecoder(resp.Body).Decode(&body2)
			resp.Body.Close()
			if body2.Code != "not_ready" || time.Now().After(deadline) {
				return resp.StatusCode, body2.Error, resp.Header
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.Eventually(10*time.Second, "the leader ready", func() error { return leader.Ready() })
	before := leader.FSM.AppliedIndex()
	hello := func(name string) string {
		b, _ := json.Marshal(cluster.UpFrame{Type: cluster.UpFrameHello, Node: &fsm.Node{Name: name, HTTPAddr: "127.0.0.1:1"}})
		return string(b) + "\n"
	}
	for _, tc := range []struct {
		path, body, want string
		status           int
	}{
		{"work/c1?index=abc", hello("c1"), "index", http.StatusBadRequest},
		{"work/c1", `{"type":"beat","seq":1}` + "\n", "the first frame must be", http.StatusBadRequest},
		{"work/c1", "not json\n", "not a JSON up frame", http.StatusBadRequest},
		{"work/c1", hello("c2"), `differs from the stream's node "c1"`, http.StatusBadRequest},
		{"work/c1", "", "hello: EOF", http.StatusBadRequest},
		{"work/" + leader.Name, hello(leader.Name), "is a raft member", http.StatusConflict},
		{fmt.Sprintf("work/c1?index=%d", before+1_000_000), hello("c1"), "is ahead of this server", http.StatusConflict},
	} {
		status, msg, _ := post(leader, tc.path, tc.body)
		if status != tc.status || !strings.Contains(msg, tc.want) {
			t.Errorf("POST %s %q: %d %q; want %d naming %q", tc.path, tc.body, status, msg, tc.status, tc.want)
		}
	}
	// What a refused stream could have written is a client's record (the
	// registration); the cluster's own records may still settle meanwhile
	// on a loaded machine, so the index alone cannot tell.
	for _, name := range []string{"c1", "c2"} {
		if nd, err := nodeRecord(leader, name); !errors.Is(err, fsm.ErrNotFound) {
			t.Errorf("the refusals registered %s: %+v, %v", name, nd, err)
		}
	}
	// One new stream a second (per server; the leader's went to the
	// requests above): a follower opens one, and refuses the next at once.
	via := c.Followers()[0]
	if ws, resp := openWork(t, via, "c1", 0); ws == nil {
		t.Fatalf("a stream within the rate: %s", resp.Status)
	}
	// As a client sends it: a body that stays open after the hello.
	body, open := io.Pipe()
	defer open.Close()
	go func() { _, _ = io.WriteString(open, hello("c3")) }()
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d%swork/c3", via.Port, cluster.InternalPrefix), body)
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("a stream over the rate, body open: %v (the refusal must not wait for the body to end)", err)
	}
	var refused struct{ Error, Code string }
	_ = json.NewDecoder(resp.Body).Decode(&refused)
	resp.Body.Close()
	status, msg, h := resp.StatusCode, refused.Error, resp.Header
	if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || !strings.Contains(msg, "1 new work streams per second") {
		t.Errorf("a stream over the rate: %d %q Retry-After %q; want 429 with a Retry-After", status, msg, h.Get("Retry-After"))
	}
	// A client holding attempts is admitted from a bucket of its own
	// (BusyPerSecond, 10 here): refused plain, taken busy.
	busyBody, busyOpen := io.Pipe()
	defer busyOpen.Close()
	go func() { _, _ = io.WriteString(busyOpen, hello("c4")) }()
	req, _ = http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d%swork/c4?busy=1", via.Port, cluster.InternalPrefix), busyBody)
	resp, err = (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("a busy client's stream: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a busy client's stream over the plain rate: %s, want 200", resp.Status)
	}
}

// A server cut off from the leader drops its work streams (after
// LeaderContactTimeout), so its clients move instead of starving; its
// pings said so first.
func TestWorkStreamDroppedWhenServerLosesLeader(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond})
	c.WaitForLeader()
	via := c.Followers()[0]
	ws, resp := openWork(t, via, "client-1", 0)
	if ws == nil {
		t.Fatalf("open: %s", resp.Status)
	}
	ws.nextWork(t, 5*time.Second)
	var others []int
	for _, nd := range c.Nodes() {
		if nd.Name != via.Name {
			others = append(others, nd.Index)
		}
	}
	c.Partition([]int{via.Index}, others)
	cut := time.Now()
	sawNoContact := false
	for f := range ws.frames {
		if f.Type == cluster.WorkFramePing && !f.LeaderContact {
			sawNoContact = true
		}
		if time.Since(cut) > 30*time.Second {
			t.Fatal("the stream still runs 30 s after its server was cut off")
		}
	}
	took := time.Since(cut)
	t.Logf("stream dropped %.1fs after the cut", took.Seconds())
	if !sawNoContact {
		t.Error("the stream ended without a ping saying the leader was lost")
	}
}

// An operator's GPU health reset of a client reaches it on its work stream
// as a frame of its own, though its work did not change.
func TestWorkStreamCarriesGPUReset(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond})
	leader := c.WaitForLeader()
	via := c.Followers()[0]
	ws, resp := openWork(t, via, "client-g", leader.FSM.AppliedIndex())
	if ws == nil {
		t.Fatalf("open: %s", resp.Status)
	}
	if f, work, _ := ws.nextWork(t, 5*time.Second); len(work) != 0 || f.GPUReset != nil {
		t.Fatalf("first frame %+v %v", f, work)
	}
	c.Eventually(clustertest.ConvergeTimeout, "client-g recorded", func() error {
		_, err := nodeRecord(leader, "client-g")
		return err
	})
	apply(t, leader, fsm.CmdNodeGPUs, fsm.NodeGPUs{Name: "client-g", GPUs: []fsm.GPU{{UUID: "GPU-a", Health: "xid 79"}}})
	reset := apply(t, leader, fsm.CmdResetGPUs, fsm.ResetGPUs{Name: "client-g"})
	f, work, _ := ws.nextWork(t, 5*time.Second)
	if len(work) != 0 || f.GPUReset == nil || f.GPUReset.Index != reset.Index || !slices.Equal(f.GPUReset.UUIDs, []string{"GPU-a"}) {
		t.Fatalf("frame after the reset (index %d): %+v %v", reset.Index, f, work)
	}
}

// stuckClient opens node's stream through via on a raw connection that
// beats every 100 ms and never reads what the server sends. The channel
// gets the error of the first beat the connection refuses: the server
// dropped it.
func stuckClient(t *testing.T, via *clustertest.Node, node string) <-chan error {
	t.Helper()
	chunk := func(w io.Writer, frame any) error {
		b, _ := json.Marshal(frame)
		_, err := fmt.Fprintf(w, "%x\r\n%s\n\r\n", len(b)+1, b)
		return err
	}
	for deadline := time.Now().Add(clustertest.ConvergeTimeout); ; {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", via.Port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(conn, "POST %swork/%s HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n", cluster.InternalPrefix, node)
		// Room for every placement the test makes (a full node's placements
		// are skipped: no frame).
		self := fsm.Node{Name: node, HTTPAddr: "127.0.0.1:1", Capacity: fsm.Resources{CPU: 1 << 30, MemoryMB: 1 << 30}, Slots: 1000}
		if err := chunk(conn, cluster.UpFrame{Type: cluster.UpFrameHello, Node: &self}); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil) // the head only: its body is never read
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			conn.Close()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("open %s: %s", node, resp.Status)
		}
		dropped := make(chan error, 1)
		go func() {
			for seq := uint64(1); ; seq++ {
				if err := chunk(conn, cluster.UpFrame{Type: cluster.UpFrameBeat, Seq: seq}); err != nil {
					dropped <- err
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		return dropped
	}
}

// A client that stops reading its stream is dropped once a write to it
// has waited workWriteTimeout, and more such clients than the server has
// frame writers do not keep another client's frames from it.
func TestWorkStreamDropsAClientThatDoesNotRead(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{})
	leader := c.WaitForLeader()
	via := c.Followers()[0]
	const stuck = 6 // more than the server's 4 frame writers
	cluster.RegisterMetrics()
	failures := counter(t, "foreman_work_stream_write_failures_total")
	dropped := map[int]<-chan error{}
	for i := range stuck {
		dropped[i] = stuckClient(t, via, fmt.Sprintf("stuck-%d", i))
	}
	ws, resp := openWork(t, via, "healthy", leader.FSM.AppliedIndex())
	if ws == nil {
		t.Fatalf("open: %s", resp.Status)
	}
	ws.nextWork(t, clustertest.ConvergeTimeout)
	c.Eventually(clustertest.ConvergeTimeout, "the clients recorded", func() error {
		for i := range stuck {
			if _, err := nodeRecord(leader, fmt.Sprintf("stuck-%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	// Each round changes every attached stuck client's set: a frame of
	// 1 MiB each (a writer sends a stream's newest set once, however many
	// changes it missed), until their buffers are full and every one is
	// dropped. The healthy client's placement comes while they fill.
	// A round every 50 ms: a load's pace, not a wait for anything.
	pace := time.NewTicker(50 * time.Millisecond)
	defer pace.Stop()
	deadline := time.Now().Add(clustertest.ConvergeTimeout)
	for round := 0; len(dropped) > 0; round, _ = round+1, <-pace.C {
		if time.Now().After(deadline) {
			t.Fatalf("%d stuck clients still attached %s after they stopped reading", len(dropped), clustertest.ConvergeTimeout)
		}
		ids := submitMany(t, leader, len(dropped))
		var ps []fsm.Placement
		for i := range dropped {
			ps = append(ps, fsm.Placement{JobID: ids[len(ps)], Node: fmt.Sprintf("stuck-%d", i)})
		}
		apply(t, leader, fsm.CmdPlace, fsm.Place{Placements: ps})
		if round == 4 {
			id := submit(t, leader)
			placed := apply(t, leader, fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: id, Node: "healthy"}}})
			if f, work, _ := ws.nextWork(t, clustertest.ConvergeTimeout); len(work) != 1 || f.Index < placed.Index {
				t.Fatalf("the healthy client's frame after its placement (index %d): index %d, work %v", placed.Index, f.Index, work)
			}
		}
		for i, ch := range dropped {
			select {
			case err := <-ch:
				t.Logf("stuck-%d dropped after %d rounds (%s): its beat got %v", i, round+1, time.Since(deadline.Add(-clustertest.ConvergeTimeout)).Round(time.Millisecond), err)
				delete(dropped, i)
			default:
			}
		}
	}
	if got := counter(t, "foreman_work_stream_write_failures_total") - failures; got < stuck {
		t.Errorf("foreman_work_stream_write_failures_total rose by %v for %d dropped clients", got, stuck)
	}
}
