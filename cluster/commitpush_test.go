package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
)

// A follower learns that an entry committed from the leader's next
// AppendEntries; with a quiet log hashicorp/raft sends that only after
// CommitTimeout. The leader's commit push makes it learn at once: with a
// CommitTimeout of ten minutes, every follower still applies a lone submit.
func TestFollowersLearnCommitsWithoutCommitTimeout(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{Configure: func(_ int, cfg *cluster.Config) {
		cfg.Raft.CommitTimeout = 10 * time.Minute
	}})
	leader := c.WaitForLeader()
	c.WaitConverged()
	for round := range 3 {
		id := submit(t, leader)
		for _, f := range c.Followers() {
			c.Eventually(clustertest.ConvergeTimeout, fmt.Sprintf("round %d: %s applies the submit", round, f.Name), func() error {
				return hasJob(f, id)
			})
		}
	}
}

// The index a follower catches up to (its InSync gate) must be one its FSM
// can reach: the leader's log may end with barriers (commit pushes,
// consistent reads), which no FSM records as applied.
func TestCatchUpIndexIgnoresTrailingBarriers(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	leader := c.WaitForLeader()
	submit(t, leader)
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	if err := leader.Barrier(ctx); err != nil { // the log now ends with a barrier
		t.Fatalf("barrier: %v", err)
	}
	idx := leaderIndex(t, leader)
	if applied := leader.FSM.AppliedIndex(); idx > applied {
		t.Fatalf("catch-up index %d is beyond the leader's own applied index %d", idx, applied)
	}
	for _, f := range c.Followers() {
		c.Eventually(clustertest.ConvergeTimeout, f.Name+" reaches the catch-up index", func() error {
			if got := f.FSM.AppliedIndex(); got < idx {
				return fmt.Errorf("applied %d of %d", got, idx)
			}
			return nil
		})
	}
}

// leaderIndex asks nd's internal endpoint for the catch-up index.
func leaderIndex(t *testing.T, nd *clustertest.Node) uint64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%sindex", nd.Port, cluster.InternalPrefix), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(cluster.ForwardedHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET index: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Index uint64 `json:"index"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET index: status %d: %v", resp.StatusCode, err)
	}
	if out.Error != "" || out.Index == 0 {
		t.Fatal(errors.New("GET index: " + out.Error))
	}
	return out.Index
}
