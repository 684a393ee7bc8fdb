package agent

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

// lazyWork is a workSource whose FSM is known only once the node started.
type lazyWork struct {
	mu sync.Mutex
	f  *fsm.FSM
}

func (w *lazyWork) NodeWork(node string) (any, error) {
	w.mu.Lock()
	f := w.f
	w.mu.Unlock()
	return newWorkSource(f).NodeWork(node)
}

// TestWorkClientFollowsItsStream: a node's executor view built from a work
// stream (no local replica) sees the attempts placed on it, with their
// specs, is in contact with the leader while the leader confirms its
// beats (through the pings), and keeps
// both when the server it streams from is killed: it moves to another.
func TestWorkClientFollowsItsStream(t *testing.T) {
	srcs := []*lazyWork{{}, {}, {}}
	c := clustertest.NewCluster(t, 3, clustertest.Options{Configure: func(i int, cfg *cluster.Config) {
		cfg.Work = srcs[i]
		cfg.WorkStreams.PingInterval = 100 * time.Millisecond
	}})
	for i, s := range srcs {
		s.mu.Lock()
		s.f = c.Node(i).FSM
		s.mu.Unlock()
	}
	c.WaitForLeader()
	target := "client-1" // the client whose work it follows: registered by its hello
	var servers []string
	for _, nd := range c.Nodes()[:2] {
		servers = append(servers, fmt.Sprintf("http://127.0.0.1:%d", nd.Port))
	}
	wc := newWorkClient(fsm.Node{Name: target, HTTPAddr: "127.0.0.1:1"}, servers, &http.Client{}, nil, 1500*time.Millisecond, nil)
	if _, err := wc.LiveAttempts(target); err == nil {
		t.Fatal("LiveAttempts answered before any work arrived")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	changed, stop := wc.Watch()
	defer stop()
	place := func() string { t.Helper(); return placeOn(t, c, target) }
	waitFor := func(want []string) {
		t.Helper()
		c.Eventually(10*time.Second, fmt.Sprintf("the client holds %v", want), func() error {
			got, err := wc.LiveAttempts(target)
			if err != nil {
				return err
			}
			var ids []string
			for _, a := range got {
				if a.Attempt.State != fsm.AttemptAssigned || !slices.Equal(a.Spec.Command, []string{"echo", a.Attempt.JobID}) {
					return fmt.Errorf("attempt %+v with spec %+v", a.Attempt, a.Spec)
				}
				ids = append(ids, a.Attempt.JobID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, want) {
				return fmt.Errorf("holds %v", ids)
			}
			if !wc.InContactWithLeader() {
				return fmt.Errorf("not in contact with the leader")
			}
			return nil
		})
	}

	waitFor(nil)
	first := place()
	waitFor([]string{first})
	select {
	case <-changed:
	default:
		t.Error("no Watch signal for the new set")
	}

	from := wc.Server()
	for _, nd := range c.Nodes()[:2] {
		if from == fmt.Sprintf("http://127.0.0.1:%d", nd.Port) {
			t.Logf("killing %s, the client's server", nd.Name)
			c.Kill(nd.Index)
		}
	}
	second := place()
	want := []string{first, second}
	slices.Sort(want)
	waitFor(want)
	if now := wc.Server(); now == from || now == "" {
		t.Fatalf("after its server %s was killed the client streams from %q", from, now)
	}
}

// placeOn submits a job and places it on node, through the leader.
func placeOn(t *testing.T, c *clustertest.Cluster, node string) string {
	t.Helper()
	id := ulid.Make().String()
	for _, p := range []struct {
		typ fsm.CommandType
		v   any
	}{
		{fsm.CmdSubmitJobs, fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: id, Spec: fsm.JobSpec{Command: []string{"echo", id}, Priority: 50}}}}},
		{fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: id, Node: node}}}},
	} {
		cmd, err := fsm.NewCommand(p.typ, time.Now(), p.v)
		if err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := c.WaitForLeader().Apply(actx, cmd)
		acancel()
		if err == nil && (res.Err != nil || len(res.Skipped) > 0) {
			err = fmt.Errorf("%v %v", res.Err, res.Skipped)
		}
		if err != nil {
			t.Fatalf("%s: %v", p.typ, err)
		}
	}
	return id
}

// An idle client beats at the idle interval, with its contact gate closed
// between beats (its window is the busy one's), and work arriving brings a
// beat at once: the gate opens again in a round trip, not at the next
// idle beat (9 s; the test gives it 5).
func TestIdleWorkClientBeatsAtOnceWhenWorkArrives(t *testing.T) {
	srcs := []*lazyWork{{}, {}, {}}
	c := clustertest.NewCluster(t, 3, clustertest.Options{Configure: func(i int, cfg *cluster.Config) {
		cfg.Work = srcs[i]
		cfg.WorkStreams.PingInterval = 100 * time.Millisecond
	}})
	for i, s := range srcs {
		s.mu.Lock()
		s.f = c.Node(i).FSM
		s.mu.Unlock()
	}
	c.WaitForLeader()
	const target, contact = "client-1", 300 * time.Millisecond
	wc := newWorkClient(fsm.Node{Name: target, HTTPAddr: "127.0.0.1:1"}, []string{fmt.Sprintf("http://127.0.0.1:%d", c.Node(0).Port)},
		&http.Client{}, nil, contact, nil)
	wc.beatEvery = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	c.Eventually(20*time.Second, "an idle beat sent and the gate closed after it", func() error {
		wc.mu.Lock()
		every, confirmed := wc.every, wc.lastContact
		wc.mu.Unlock()
		switch {
		case every != cluster.ClientIdleBeatInterval:
			return fmt.Errorf("the last beat announced %s", every)
		case confirmed.IsZero():
			return fmt.Errorf("no beat confirmed yet")
		case wc.InContactWithLeader():
			return fmt.Errorf("the gate is open")
		}
		return nil
	})
	wc.mu.Lock()
	idleBeat := wc.lastContact
	wc.mu.Unlock()
	id := placeOn(t, c, target)
	c.Eventually(5*time.Second, "the gate open with the job", func() error {
		got, err := wc.LiveAttempts(target)
		if err != nil || len(got) != 1 || got[0].Attempt.JobID != id {
			return fmt.Errorf("holds %v (%v)", got, err)
		}
		if !wc.InContactWithLeader() {
			return fmt.Errorf("the gate is closed")
		}
		return nil
	})
	wc.mu.Lock()
	every, confirmed := wc.every, wc.lastContact
	wc.mu.Unlock()
	if every != wc.beatEvery || time.Since(idleBeat) >= cluster.ClientIdleBeatInterval {
		t.Fatalf("with work, the last beat announced %s, %s after the idle one; want %s, sooner than %s",
			every, confirmed.Sub(idleBeat), wc.beatEvery, cluster.ClientIdleBeatInterval)
	}
}

// The fencing gate of a client (invariant 2): it is open only while the
// leader confirms the client's beats, and the leader's last-heard time of
// the client is never earlier than the send time of the newest confirmed
// beat. A server cut off from the leader keeps the stream and its pings,
// but its confirmations stop: the gate closes within the contact window.
func TestWorkClientGateFollowsTheLeadersConfirmations(t *testing.T) {
	srcs := []*lazyWork{{}, {}, {}}
	c := clustertest.NewCluster(t, 3, clustertest.Options{Configure: func(i int, cfg *cluster.Config) {
		cfg.Work = srcs[i]
		cfg.WorkStreams.PingInterval = 100 * time.Millisecond
		cfg.Clients.RelayInterval = 50 * time.Millisecond
		cfg.LeaderContactTimeout = 10 * time.Second // the server keeps the stream open while cut off
	}})
	for i, s := range srcs {
		s.mu.Lock()
		s.f = c.Node(i).FSM
		s.mu.Unlock()
	}
	leader := c.WaitForLeader()
	via := c.Followers()[0]
	const contact = 1500 * time.Millisecond
	wc := newWorkClient(fsm.Node{Name: "client-1", HTTPAddr: "127.0.0.1:1"}, []string{fmt.Sprintf("http://127.0.0.1:%d", via.Port)},
		&http.Client{}, nil, contact, nil)
	// It holds no work: idle beats would close the gate between beats
	// whatever the leader confirms.
	wc.beatEvery, wc.idleEvery = 100*time.Millisecond, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	c.Eventually(10*time.Second, "the gate open", func() error {
		if !wc.InContactWithLeader() {
			return fmt.Errorf("not in contact")
		}
		return nil
	})
	var others []int
	for _, nd := range c.Nodes() {
		if nd.Name != via.Name {
			others = append(others, nd.Index)
		}
	}
	c.Partition([]int{via.Index}, others)
	cut := time.Now()
	c.Eventually(contact+5*time.Second, "the gate closed", func() error {
		if wc.InContactWithLeader() {
			return fmt.Errorf("still in contact %.1fs after the cut", time.Since(cut).Seconds())
		}
		return nil
	})
	if wc.Server() == "" {
		t.Fatal("the stream ended: the gate closed for that, not for the missing confirmations")
	}
	wc.mu.Lock()
	confirmed := wc.lastContact
	wc.mu.Unlock()
	heard, ok := leader.LastHeardFrom("client-1")
	if !ok || heard.Before(confirmed) {
		t.Fatalf("the leader last heard client-1 at %v, before the send of its newest confirmed beat (%v): the lost rule would fire early",
			heard, confirmed)
	}
	t.Logf("gate closed %.1fs after the cut; leader heard the client %.0f ms after the confirmed beat's send",
		time.Since(cut).Seconds(), float64(heard.Sub(confirmed).Microseconds())/1000)
}

// TestWorkClientStallReopensTheStream: a client that did not run for a
// while (SIGSTOP) is out of sync at once, no frame of the stream it had
// open counts any more, and it is in sync again only through a new
// stream's first work frame.
func TestWorkClientStallReopensTheStream(t *testing.T) {
	src := &lazyWork{}
	c := clustertest.NewCluster(t, 1, clustertest.Options{Configure: func(i int, cfg *cluster.Config) {
		cfg.Work = src
		cfg.WorkStreams.PingInterval = 100 * time.Millisecond
	}})
	src.mu.Lock()
	src.f = c.Node(0).FSM
	src.mu.Unlock()
	c.WaitForLeader()
	const target = "client-1"
	wc := newWorkClient(fsm.Node{Name: target, HTTPAddr: "127.0.0.1:1"}, []string{fmt.Sprintf("http://127.0.0.1:%d", c.Node(0).Port)},
		&http.Client{}, nil, 1500*time.Millisecond, nil)
	wc.beatEvery = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	inSync := func() error {
		if !wc.InSync() {
			return fmt.Errorf("not in sync")
		}
		return nil
	}
	c.Eventually(20*time.Second, "in sync through the first stream", inSync)
	wc.mu.Lock()
	gen := wc.gen
	wc.mu.Unlock()

	wc.stalled(12 * time.Second)
	if wc.InSync() {
		t.Fatal("in sync right after a stall")
	}
	// A frame of the ended stream, read before it ended, counts for nothing.
	wc.take(gen, cluster.WorkFrame{Type: cluster.WorkFrameWork, Index: wc.Index()}, nil, newBeatLog())
	if wc.InSync() {
		t.Fatal("a frame of the stream the stall ended put the client back in sync")
	}
	c.Eventually(20*time.Second, "in sync again through a new stream", inSync)
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.gen != gen+1 || wc.endStream == nil {
		t.Fatalf("after the stall: generation %d (want %d), stream open %v", wc.gen, gen+1, wc.endStream != nil)
	}
}
