package cluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

// A client heard through a follower: its beats reach the leader (the
// follower's pings confirm them), the leader knows when it last heard it,
// and counts its stream on the follower (RaftInfo); once the client falls
// silent the follower drops its stream and the leader commits it dead and
// counts it no more.
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
	c.Eventually(10*time.Second, "c1 counted on "+via.Name, func() error {
		return wantStreams(leader, map[string]int{via.Name: 1})
	})
	for _, s := range via.Node.RaftInfo().Servers {
		if s.Clients != nil {
			t.Errorf("a follower's RaftInfo counts %d clients on %s; only the leader hears them", *s.Clients, s.ID)
		}
	}

	silent := ws.stopBeats()
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
	if err := wantStreams(leader, map[string]int{}); err != nil {
		t.Errorf("dead c1: %v", err)
	}
}

// wantStreams checks the leader's count of clients per server (RaftInfo):
// want's, and 0 on every other server.
func wantStreams(leader *clustertest.Node, want map[string]int) error {
	for _, s := range leader.Node.RaftInfo().Servers {
		if s.Clients == nil {
			return fmt.Errorf("the leader's RaftInfo has no client count for %s", s.ID)
		}
		if *s.Clients != want[s.ID] {
			return fmt.Errorf("%d clients on %s, want %d", *s.Clients, s.ID, want[s.ID])
		}
	}
	return nil
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
	c, via := heldSilence(t)
	leader := c.WaitForLeader()
	for i := range 5 {
		nd, err := nodeRecord(leader, fmt.Sprintf("m%d", i))
		if err != nil || nd.Gossip != fsm.NodeAlive {
			t.Errorf("m%d: %+v, %v; want alive while the guard holds", i, nd, err)
		}
	}
	// Every server shows them silent (the replicated held set), from
	// about when they fell silent.
	c.Eventually(10*time.Second, "the held set on a follower", func() error {
		got, err := heldSet(via)
		if err != nil {
			return err
		}
		if len(got) != 5 {
			return fmt.Errorf("held set %v, want m0..m4", got)
		}
		for name, since := range got {
			if d := time.Since(since); d < 0 || d > 30*time.Second {
				return fmt.Errorf("%s silent since %v (%v ago)", name, since, d)
			}
		}
		return nil
	})
	// Heard again: the set empties.
	reopenSilenced(t, via)
	heldSetEmpties(c, via)
}

// A new leader keeps the held set it inherited for a while (it has not
// watched the silence itself), but not for the clients it hears from: the
// set empties when they come back, not when that while is over (12.5 s
// here, longer than the wait below).
func TestHeldSetEmptiesUnderANewLeader(t *testing.T) {
	c, via := heldSilence(t)
	c.Eventually(10*time.Second, "the held set committed", func() error {
		if got, err := heldSet(via); err != nil || len(got) != 5 {
			return fmt.Errorf("held set %v (%v), want m0..m4", got, err)
		}
		return nil
	})
	old := c.WaitForLeader().Name
	c.Eventually(30*time.Second, "leadership moved", func() error {
		if l := c.WaitForLeader(); l.Name == old {
			if _, err := l.TransferLeadership(context.Background(), ""); err != nil {
				return err
			}
			return fmt.Errorf("%s still leads", old)
		}
		return nil
	})
	t.Logf("leader now %s", c.WaitForLeader().Name)
	reopenSilenced(t, via)
	heldSetEmpties(c, via)
}

// heldSilence opens five client streams through a follower, lets them
// fall silent together and waits until the leader holds their deaths.
func heldSilence(t *testing.T) (*clustertest.Cluster, *clustertest.Node) {
	t.Helper()
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond, NewPerSecond: 1000},
		cluster.ClientLimits{RelayInterval: 50 * time.Millisecond, ReadTimeout: 5 * time.Second, DeadAfter: 500 * time.Millisecond,
			MassSilenceMin: 3, MassSilenceFraction: 0.3})
	c.WaitForLeader()
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
	return c, via
}

// reopenSilenced opens m0..m4's streams again: they are heard from.
func reopenSilenced(t *testing.T, via *clustertest.Node) {
	t.Helper()
	for i := range 5 {
		if back, resp := openWork(t, via, fmt.Sprintf("m%d", i), 0); back == nil {
			t.Fatalf("reopen m%d: %s", i, resp.Status)
		}
	}
}

func heldSet(n *clustertest.Node) (got map[string]time.Time, err error) {
	err = n.FSM.View(func(tx *fsm.Tx) (err error) { got, err = tx.SilentClients(); return err })
	return got, err
}

func heldSetEmpties(c *clustertest.Cluster, via *clustertest.Node) {
	c.Eventually(10*time.Second, "the held set emptied", func() error {
		got, err := heldSet(via)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("held set %v, want none", got)
		}
		return nil
	})
}

// counter is the default registry's counter name (-1: not registered).
func counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
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

// An idle client announces a longer beat interval, and is given it: when
// it and a client at the usual interval fall silent together, the usual
// one's stream is dropped and it is dead after ReadTimeout and DeadAfter,
// while the idle one's stream stays and it stays alive; later (its slack
// out) it is dead all the same.
func TestIdleClientsAreGivenTheirAnnouncedInterval(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond},
		cluster.ClientLimits{RelayInterval: 50 * time.Millisecond, ReadTimeout: time.Second, DeadAfter: time.Second})
	leader := c.WaitForLeader()
	via := c.Followers()[0]
	busy, resp := openWork(t, via, "busy", 0)
	if busy == nil {
		t.Fatalf("open busy: %s", resp.Status)
	}
	idle, resp := openWorkEvery(t, via, "idle", 0, cluster.ClientIdleBeatInterval.Milliseconds())
	if idle == nil {
		t.Fatalf("open idle: %s", resp.Status)
	}
	for _, ws := range []*workStream{busy, idle} {
		for f := range ws.frames {
			if f.Acked > 0 {
				break
			}
		}
	}
	busy.stopBeats()
	silent := idle.stopBeats()
	dead := func(name string) func() error {
		return func() error {
			nd, err := nodeRecord(leader, name)
			if err != nil {
				return err
			}
			if nd.Gossip != fsm.NodeDead {
				return fmt.Errorf("%s is %s", name, nd.Gossip)
			}
			return nil
		}
	}
	for range busy.frames { // dropped after ReadTimeout
	}
	c.Eventually(10*time.Second, "busy dead", dead("busy"))
	t.Logf("busy dead %.1fs after its last beat", time.Since(silent).Seconds())
	if nd, err := nodeRecord(leader, "idle"); err != nil || nd.Gossip != fsm.NodeAlive {
		t.Fatalf("idle: %+v, %v; want alive while its announced interval runs", nd, err)
	}
	for drained := false; !drained; {
		select {
		case _, ok := <-idle.frames:
			if !ok {
				t.Fatal("the idle client's stream was dropped at the usual read timeout")
			}
		default:
			drained = true
		}
	}
	c.Eventually(30*time.Second, "idle dead", dead("idle"))
	took := time.Since(silent)
	t.Logf("idle dead %.1fs after its last beat", took.Seconds())
	if slack := 2 * (cluster.ClientIdleBeatInterval - cluster.ClientBeatInterval); took < time.Second+slack {
		t.Errorf("idle declared dead %.1fs after its last beat, before DeadAfter and its slack (%s)", took.Seconds(), time.Second+slack)
	}
}

// Beat intervals no client announces are refused: a beat frame saying one
// ends its stream, a relay carrying one is a 400, and neither changes the
// client's record.
func TestBeatIntervalOverTheIdleOneIsRefused(t *testing.T) {
	c := workCluster(t, cluster.WorkStreamLimits{PingInterval: 100 * time.Millisecond},
		cluster.ClientLimits{RelayInterval: 50 * time.Millisecond, ReadTimeout: time.Second, DeadAfter: time.Second})
	leader := c.WaitForLeader()
	too := cluster.ClientIdleBeatInterval.Milliseconds() + 1
	ws, resp := openWorkEvery(t, c.Followers()[0], "slow", 0, too)
	if ws == nil {
		t.Fatalf("open: %s", resp.Status)
	}
	ended := make(chan struct{})
	go func() {
		for range ws.frames {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second): // with the interval taken, 2 minutes
		t.Fatalf("a stream announcing beats every %d ms is still open", too)
	}
	for _, body := range []string{
		fmt.Sprintf(`{"server":"x","beats":[{"node":"slow","seq":9,"age_ms":0,"every_ms":%d}]}`, too),
		`{"server":"x","beats":[{"node":"slow","seq":9,"age_ms":0,"every_ms":-1}]}`,
	} {
		url := fmt.Sprintf("http://127.0.0.1:%d%sclient-beats", leader.Port, cluster.InternalPrefix)
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "every_ms") {
			t.Errorf("relay %s: %s %s; want 400 naming every_ms", body, resp.Status, msg)
		}
	}
	if heard, ok := leader.LastHeardFrom("slow"); ok && time.Since(heard) < time.Second {
		t.Errorf("the leader took the refused relay: slow heard %v ago", time.Since(heard))
	}
}
