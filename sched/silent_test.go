package sched

import (
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// A client whose silence the leader holds is shown silent in the snapshot
// (fsm.ShowSilent) and takes no new attempt; the records are not touched.
func TestPlanSkipsHeldSilentClients(t *testing.T) {
	quiet, talking := node("a-quiet", 8000, 8192), node("b-talking", 1000, 1024)
	quiet.Role, talking.Role = fsm.RoleClient, fsm.RoleClient
	shared := []fsm.Node{quiet, talking}
	shown := fsm.ShowSilent(shared, map[string]time.Time{"a-quiet": t0})
	if shared[0].Gossip != fsm.NodeAlive || shown[0].Gossip != fsm.NodeSilent || shown[1].Gossip != fsm.NodeAlive {
		t.Fatalf("shared %v / shown %v", shared[0].Gossip, shown[0].Gossip)
	}
	checkPlacedOn(t, shown, job("j", 50, 100, 64), []string{"b-talking"}, "")
	checkPlacedOn(t, shown[:1], job("k", 50, 100, 64), nil, "1 node: 1 node silent")
}
