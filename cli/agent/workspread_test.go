package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// TestClientsSpreadAfterRollingRestart: 15 clients on 3 servers (each
// serving the API too). After a rolling restart, which leaves the server
// restarted last with no client, the servers hand clients over until each
// holds its share within ±20%; no client is ever committed dead, so no
// attempt is lost or rerun (each job keeps its one attempt). A follower's
// GET /v1/cluster/raft shows every server's clients as the leader counts
// them (issue 38: the leader's view from any node).
func TestClientsSpreadAfterRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster with a rolling restart: skipped in -short mode")
	}
	const clients, spreadTimeout = 15, 2 * time.Minute
	c := clustertest.NewCluster(t, 3, clustertest.Options{
		Configure: func(i int, cfg *cluster.Config) { cfg.Spread.Interval = 500 * time.Millisecond },
		Work:      func(i int, f *fsm.FSM) cluster.WorkSource { return newWorkSource(f) },
		Serve: func(i int, n *cluster.Node, f *fsm.FSM, mux *http.ServeMux) {
			mux.Handle("/v1/", httpapi.New(httpapi.DefaultConfig(), httpapi.Deps{Cluster: clusterAdapter{n}, State: f}))
		},
	})
	c.WaitForLeader()
	url := func(nd *clustertest.Node) string { return fmt.Sprintf("http://127.0.0.1:%d", nd.Port) }
	var servers []string
	for _, nd := range c.Nodes() {
		servers = append(servers, url(nd))
	}
	var wcs []*workClient
	for i := range clients {
		wc := newWorkClient(fsm.Node{Name: fmt.Sprintf("client-%02d", i), HTTPAddr: "127.0.0.1:1"}, servers, &http.Client{}, nil, cluster.ClientContactWindow, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- wc.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		wcs = append(wcs, wc)
	}
	perServer := func() (map[string]int, int) {
		out, attached := map[string]int{}, 0
		for _, s := range servers {
			out[s] = 0
		}
		for _, wc := range wcs {
			if s := wc.Server(); s != "" {
				out[s]++
				attached++
			}
		}
		return out, attached
	}
	even := func() error {
		counts, attached := perServer()
		if attached < clients {
			return fmt.Errorf("%d of %d clients attached: %v", attached, clients, counts)
		}
		share := float64(clients) / float64(len(servers))
		for s, n := range counts {
			if float64(n) < 0.8*share || float64(n) > 1.2*share {
				return fmt.Errorf("%s holds %d (share %.1f): %v", s, n, share, counts)
			}
		}
		return nil
	}
	c.Eventually(spreadTimeout, "every client attached", func() error {
		_, attached := perServer()
		if attached < clients {
			return fmt.Errorf("%d of %d attached", attached, clients)
		}
		return nil
	})

	// Five clients hold an attempt each through the restarts.
	jobs := map[string]string{}
	for _, wc := range wcs[:5] {
		jobs[placeOn(t, c, wc.name)] = wc.name
	}
	before := clientRecords(t, c.WaitForLeader())

	// The rolling restart: each server stopped (its clients move to the
	// others) and started again, once the cluster has it back.
	for i, nd := range c.Nodes() {
		c.Stop(i)
		c.Eventually(spreadTimeout, "the clients off "+nd.Name, func() error {
			counts, attached := perServer()
			if attached < clients || counts[url(nd)] > 0 {
				return fmt.Errorf("%d attached: %v", attached, counts)
			}
			return nil
		})
		if err := c.StartNode(i); err != nil {
			t.Fatalf("start %s again: %v", nd.Name, err)
		}
		c.Eventually(clustertest.LeaderTimeout, nd.Name+" ready", func() error { return nd.Live().Ready() })
	}
	restarted := time.Now()
	c.Eventually(spreadTimeout, "the clients even over the servers (±20%)", even)
	counts, _ := perServer()
	t.Logf("even %s after the last restart: %v", time.Since(restarted).Round(time.Millisecond), counts)

	// No client was committed dead, so no attempt was lost: each job has
	// its one attempt, still on its client.
	leader := c.WaitForLeader()
	after := clientRecords(t, leader)
	for name, b := range before {
		if a := after[name]; a.Gossip != fsm.NodeAlive || !a.StateChangedAt.Equal(b.StateChangedAt) {
			t.Errorf("%s: %s since %s, was %s since %s", name, a.Gossip, a.StateChangedAt, b.Gossip, b.StateChangedAt)
		}
	}
	if err := leader.FSM.View(func(tx *fsm.Tx) error {
		for id, node := range jobs {
			atts, err := tx.Attempts(id)
			if err != nil {
				return err
			}
			if len(atts) != 1 || atts[0].Node != node || atts[0].State != fsm.AttemptAssigned {
				t.Errorf("job %s: attempts %+v, want its one attempt assigned on %s", id, atts, node)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A follower answers with the leader's count of each server's clients.
	var follower *clustertest.Node
	for _, nd := range c.Nodes() {
		if nd.Live() != nil && !nd.Live().IsLeader() {
			follower = nd
		}
	}
	c.Eventually(20*time.Second, "a follower's raft view counting every client", func() error {
		resp, err := http.Get(url(follower) + "/v1/cluster/raft")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var info api.RaftInfo
		if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
			return err
		}
		if info.Node != follower.Name || info.State != "Follower" {
			return fmt.Errorf("answered by %s as %s", info.Node, info.State)
		}
		sum := 0
		for _, s := range info.Servers {
			if s.Clients == nil {
				return fmt.Errorf("server %s: clients unknown", s.ID)
			}
			sum += *s.Clients
		}
		if sum != clients {
			return fmt.Errorf("%d clients over the servers, want %d", sum, clients)
		}
		return nil
	})
}

// clientRecords is every client's node record on nd.
func clientRecords(t *testing.T, nd *clustertest.Node) map[string]fsm.Node {
	t.Helper()
	out := map[string]fsm.Node{}
	if err := nd.FSM.View(func(tx *fsm.Tx) error {
		nodes, err := tx.Nodes()
		for _, n := range nodes {
			if n.Role == fsm.RoleClient {
				out[n.Name] = n
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
