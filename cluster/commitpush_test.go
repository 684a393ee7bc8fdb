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
	"github.com/foreman-sched/foreman/fsm"
)

// A follower learns that an entry committed from the leader's next
// AppendEntries; with a quiet log hashicorp/raft sends that only after
// CommitTimeout. The leader pushes the commit of work a follower must act
// on — an attempt placed on it, a stop requested for one — at once: with a
// CommitTimeout of ten minutes the follower still sees both.
func TestFollowersLearnPlacementsAndStopsWithoutCommitTimeout(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{Configure: func(_ int, cfg *cluster.Config) {
		cfg.Raft.CommitTimeout = 10 * time.Minute
	}})
	leader := c.WaitForLeader()
	f := c.Followers()[0]
	c.Eventually(clustertest.ConvergeTimeout, "the leader knows "+f.Name+" alive", func() error {
		n, err := nodeRecord(leader, f.Name)
		if err != nil {
			return err
		}
		if n.Gossip != fsm.NodeAlive || n.Eligibility != fsm.Eligible {
			return fmt.Errorf("%s is %s/%s", f.Name, n.Gossip, n.Eligibility)
		}
		return nil
	})
	for round := range 3 {
		id := submit(t, leader)
		apply(t, leader, fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: id, Node: f.Name}}})
		c.Eventually(clustertest.ConvergeTimeout, fmt.Sprintf("round %d: %s sees its attempt", round, f.Name), func() error {
			at, err := liveAttempt(f, id)
			if err == nil && at.State != fsm.AttemptAssigned {
				err = fmt.Errorf("attempt is %s", at.State)
			}
			return err
		})
		apply(t, leader, fsm.CmdCancelJob, fsm.CancelJob{JobID: id, Reason: "test"})
		c.Eventually(clustertest.ConvergeTimeout, fmt.Sprintf("round %d: %s sees the stop request", round, f.Name), func() error {
			at, err := liveAttempt(f, id)
			if err == nil && at.CancelRequested == "" {
				err = errors.New("no stop requested")
			}
			return err
		})
	}
}

// Entries no follower must act on (a submit) are pushed once the log goes
// quiet: with a CommitTimeout of ten minutes every follower still applies
// each submit, the last of a burst included.
func TestFollowersLearnTheEndOfABurstWithoutCommitTimeout(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{Configure: func(_ int, cfg *cluster.Config) {
		cfg.Raft.CommitTimeout = 10 * time.Minute
	}})
	leader := c.WaitForLeader()
	for round := range 3 {
		id := submit(t, leader)
		index := leader.FSM.AppliedIndex()
		for _, f := range c.Followers() {
			c.Eventually(clustertest.ConvergeTimeout, fmt.Sprintf("round %d: %s applies submit %s (index %d)", round, f.Name, id, index), func() error {
				if got := f.FSM.AppliedIndex(); got < index {
					return fmt.Errorf("applied %d", got)
				}
				return nil
			})
		}
	}
}

func apply(t *testing.T, nd *clustertest.Node, typ fsm.CommandType, payload any) *fsm.Result {
	t.Helper()
	cmd, err := fsm.NewCommand(typ, time.Now(), payload)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	res, err := nd.Apply(ctx, cmd)
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err == nil && len(res.Skipped) > 0 {
		err = fmt.Errorf("skipped: %+v", res.Skipped)
	}
	if err != nil {
		t.Fatalf("%s through %s: %v", typ, nd.Name, err)
	}
	return res
}

// liveAttempt is job id's live attempt in nd's local FSM.
func liveAttempt(nd *clustertest.Node, id string) (*fsm.Attempt, error) {
	var out *fsm.Attempt
	err := nd.FSM.View(func(tx *fsm.Tx) error {
		return tx.LiveAttemptsOnNode(nd.Name, func(at *fsm.Attempt) bool {
			if at.JobID == id {
				c := *at
				out = &c
				return false
			}
			return true
		})
	})
	if err == nil && out == nil {
		err = fmt.Errorf("%s: no live attempt of job %s", nd.Name, id)
	}
	return out, err
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
