package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

// A client heard through a follower: its beats reach the leader (the
// follower's pings confirm them), the leader knows when it last heard it,
// and once the client falls silent the follower drops its stream and the
// leader commits it dead.
func TestClientBeatsThenSilenceIsDeath(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond},
		cluster.ClientLimits{RelayInterval: 50 * time.Millisecond, ReadTimeout: time.Second, DeadAfter: time.Second})
	leader := c.WaitForLeader()
	via := c.Followers()[0]
	ws, resp := openWork(t, via, "c1", 0)
	if ws == nil {
		t.Fatalf("open: %s", resp.Status)
	}
	var acked uint64
	for f := range ws.frames {
		if acked = f.Acked; acked > 0 {
			break
		}
	}
	if acked == 0 {
		t.Fatal("the stream ended before a ping confirmed a beat")
	}
	heard, ok := leader.Node.LastHeardFrom("c1")
	if !ok || time.Since(heard) > 2*time.Second {
		t.Fatalf("the leader's last-heard of c1: %v ago (known %v)", time.Since(heard), ok)
	}
	nd, err := nodeRecord(leader, "c1")
	if err != nil || nd.Role != fsm.RoleClient || nd.Gossip != fsm.NodeAlive || nd.RaftAddr != "" {
		t.Fatalf("c1's record: %+v, %v; want an alive client without a raft address", nd, err)
	}

	ws.stopBeats()
	silent := time.Now()
	for range ws.frames { // the server drops a silent stream
	}
	c.Eventually(10*time.Second, "c1 dead", func() error {
		nd, err := nodeRecord(leader, "c1")
		if err != nil {
			return err
		}
		if nd.Gossip != fsm.NodeDead {
			return fmt.Errorf("c1 is %s", nd.Gossip)
		}
		return nil
	})
	took := time.Since(silent)
	t.Logf("stream dropped and c1 dead %.1fs after its last beat", took.Seconds())
	if took < time.Second {
		t.Errorf("c1 declared dead %.1fs after its last beat, before DeadAfter (1 s)", took.Seconds())
	}
}

// A client declared dead whose stream never broke (it only fell silent
// for longer than DeadAfter) is committed alive when its beats come back.
func TestSilentClientRevives(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond},
		cluster.ClientLimits{RelayInterval: 50 * time.Millisecond, ReadTimeout: 10 * time.Second, DeadAfter: 500 * time.Millisecond})
	leader := c.WaitForLeader()
	ws, resp := openWork(t, c.Followers()[0], "c1", 0)
	if ws == nil {
		t.Fatalf("open: %s", resp.Status)
	}
	state := func(want fsm.GossipState) func() error {
		return func() error {
			nd, err := nodeRecord(leader, "c1")
			if err != nil {
				return err
			}
			if nd.Gossip != want {
				return fmt.Errorf("c1 is %s", nd.Gossip)
			}
			return nil
		}
	}
	c.Eventually(10*time.Second, "c1 alive", state(fsm.NodeAlive))
	ws.paused.Store(true)
	c.Eventually(10*time.Second, "c1 dead while silent", state(fsm.NodeDead))
	ws.paused.Store(false)
	c.Eventually(10*time.Second, "c1 alive again", state(fsm.NodeAlive))
}

// A client that says leave is dead at once and stays dead: the beats it
// sent before its leave do not revive it.
func TestLeavingClientStaysDead(t *testing.T) {
	lim := cluster.ClientLimits{RelayInterval: 50 * time.Millisecond, ReadTimeout: 10 * time.Second, DeadAfter: 2 * time.Second}
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond}, lim)
	leader := c.WaitForLeader()
	ws, resp := openWork(t, c.Followers()[0], "c1", 0)
	if ws == nil {
		t.Fatalf("open: %s", resp.Status)
	}
	for f := range ws.frames {
		if f.Acked > 0 {
			break
		}
	}
	pos, _ := leader.FSM.Events().Tail()
	ws.leave()
	for range ws.frames { // the server ends the stream once it recorded the leave
	}
	nd, err := nodeRecord(leader, "c1")
	if err != nil || nd.Gossip != fsm.NodeDead {
		t.Fatalf("c1 after its leave: %+v, %v; want dead at once", nd, err)
	}
	// Its last beats were heard less than DeadAfter before the leave: a
	// loop that took them for news would commit it alive. Watch its events
	// until the beats are older than DeadAfter.
	c.Eventually(10*time.Second, "c1's last beat older than DeadAfter", func() error {
		if heard, ok := leader.LastHeardFrom("c1"); ok && time.Since(heard) < lim.DeadAfter+500*time.Millisecond {
			return fmt.Errorf("heard %v ago", time.Since(heard))
		}
		return nil
	})
	var states []string
	leader.FSM.Events().Visit(pos, func(e *fsm.Event) {
		if e.Type == fsm.EventNode && e.Node == "c1" {
			states = append(states, e.State)
		}
	})
	if len(states) != 1 || states[0] != string(fsm.NodeDead) {
		t.Fatalf("c1's node events after its leave: %v; want only dead", states)
	}
}

// Many clients silent at once (their server cut off, the leader starved):
// the leader holds their deaths instead of failing their jobs, and says
// so in a metric.
func TestMassSilenceHoldsDeaths(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond, NewPerSecond: 1000},
		cluster.ClientLimits{RelayInterval: 50 * time.Millisecond, ReadTimeout: 5 * time.Second, DeadAfter: 500 * time.Millisecond,
			MassSilenceMin: 3, MassSilenceFraction: 0.3})
	leader := c.WaitForLeader()
	via := c.Followers()[0]
	var streams []*workStream
	for i := range 5 {
		ws, resp := openWork(t, via, fmt.Sprintf("m%d", i), 0)
		if ws == nil {
			t.Fatalf("open: %s", resp.Status)
		}
		streams = append(streams, ws)
	}
	for _, ws := range streams {
		for f := range ws.frames {
			if f.Acked > 0 {
				break
			}
		}
	}
	for _, ws := range streams {
		ws.stopBeats()
	}
	c.Eventually(10*time.Second, "the guard holding 5 deaths", func() error {
		if got := gauge(t, "foreman_clients_silent_held"); got != 5 {
			return fmt.Errorf("foreman_clients_silent_held = %v", got)
		}
		return nil
	})
	for i := range 5 {
		nd, err := nodeRecord(leader, fmt.Sprintf("m%d", i))
		if err != nil || nd.Gossip != fsm.NodeAlive {
			t.Errorf("m%d: %+v, %v; want alive while the guard holds", i, nd, err)
		}
	}
}

func gauge(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestWorkStreamPingsOnConfirmation: a ping goes out as soon as the leader
// confirms a beat, not on the keep-alive tick (an hour here), so a client's
// contact window starts from a fresh confirmation.
func TestWorkStreamPingsOnConfirmation(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: time.Hour},
		cluster.ClientLimits{RelayInterval: 50 * time.Millisecond})
	c.WaitForLeader()
	ws, resp := openWork(t, c.Followers()[0], "c1", 0)
	if ws == nil {
		t.Fatalf("open: %s", resp.Status)
	}
	var acks []uint64
	deadline := time.After(clustertest.ConvergeTimeout)
	for len(acks) < 3 {
		select {
		case f, ok := <-ws.frames:
			if !ok {
				t.Fatalf("the stream ended after pings confirming %v", acks)
			}
			if f.Type != cluster.WorkFramePing {
				continue
			}
			if len(acks) > 0 && f.Acked <= acks[len(acks)-1] {
				t.Fatalf("ping confirmed beat %d after %v: a ping without a new confirmation", f.Acked, acks)
			}
			acks = append(acks, f.Acked)
		case <-deadline:
			t.Fatalf("pings confirmed %v within %s; want three (beats every 100 ms, relays every 50 ms)", acks, clustertest.ConvergeTimeout)
		}
	}
}
