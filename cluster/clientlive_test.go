package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foreman-sched/foreman/cluster"
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
