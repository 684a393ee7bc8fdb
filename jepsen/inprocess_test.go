package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/jepsen/checker"
	"github.com/foreman-sched/foreman/jepsen/history"
)

// inprocSubmit applies one SubmitJobs through node nd and records it.
func inprocSubmit(rec *history.Recorder, nd *clustertest.Node, w int, key string) history.Outcome {
	op := history.Op{Process: w, Kind: history.Submit, Node: nd.Name, Key: key, Call: rec.Now()}
	defer func() { op.Return = rec.Now(); rec.Add(op) }()
	live := nd.Live() // once: a concurrent Kill clears nd.Node
	if live == nil {
		op.Outcome, op.Err = history.Info, "node down"
		return op.Outcome
	}
	cmd, err := fsm.NewCommand(fsm.CmdSubmitJobs, time.Now(), fsm.SubmitJobs{Jobs: []fsm.NewJob{{
		ID: "job-" + key, IdempotencyKey: key,
		Spec: fsm.JobSpec{Name: key, Command: []string{"true"}, Priority: 50, MaxAttempts: 1},
	}}})
	if err != nil {
		op.Outcome, op.Err = history.Fail, err.Error()
		return op.Outcome
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res, err := live.Apply(ctx, cmd)
	switch {
	case err == nil && res != nil && len(res.Jobs) == 1:
		op.Outcome, op.JobID, op.Duplicate = history.OK, res.Jobs[0].ID, res.Jobs[0].Duplicate
	case err == nil:
		op.Outcome, op.Err = history.Info, fmt.Sprintf("odd result %+v", res)
	case res != nil && res.Err != nil && !errors.Is(err, cluster.ErrIndeterminate):
		// The command itself was refused by Apply: definite.
		op.Outcome, op.Err = history.Fail, err.Error()
	default:
		// No leader, lost leadership, timeouts: never a failure.
		op.Outcome, op.Err = history.Info, err.Error()
	}
	return op.Outcome
}

// TestInProcessSubmitUnderFaults is the fast tier: three in-process nodes,
// submitters on every node while the leader is partitioned away and a
// follower is killed and restarted; then heal, resolve indeterminate keys
// with the same key, and check that no acknowledged job is lost or
// duplicated on any node and that all nodes converge.
func TestInProcessSubmitUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	rec := history.NewRecorder()
	stop := make(chan struct{})
	var mu sync.Mutex
	pending := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; seq < 10000; seq++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				key := fmt.Sprintf("w%d-%d", w, seq)
				if inprocSubmit(rec, c.Node(w), w, key) == history.Info {
					mu.Lock()
					pending[key] = w
					mu.Unlock()
				}
			}
		}()
	}

	time.Sleep(time.Second)
	l := c.WaitForLeader()
	var others []int
	for i := 0; i < 3; i++ {
		if i != l.Index {
			others = append(others, i)
		}
	}
	start := rec.Now()
	c.Partition([]int{l.Index}, others)
	time.Sleep(4 * time.Second)
	c.Heal()
	rec.AddEvent(history.Event{Name: "isolate-leader", Start: start, End: rec.Now()})
	c.WaitForLeader()
	time.Sleep(time.Second)

	victim := others[rand.IntN(len(others))]
	start = rec.Now()
	c.Kill(victim)
	time.Sleep(3 * time.Second)
	c.Restart(victim)
	rec.AddEvent(history.Event{Name: "kill", Start: start, End: rec.Now()})
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	// Resolve indeterminate submits with the same key, bounded.
	c.WaitForLeader()
	for round := 0; round < 20; round++ {
		mu.Lock()
		keys := make([]string, 0, len(pending))
		for k := range pending {
			keys = append(keys, k)
		}
		mu.Unlock()
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			if inprocSubmit(rec, c.Leader(), 9, k) != history.Info {
				mu.Lock()
				delete(pending, k)
				mu.Unlock()
			}
		}
	}
	c.WaitConverged()

	ops := rec.Ops()
	for _, nd := range c.Live() {
		var final []checker.FinalJob
		err := nd.FSM.View(func(tx *fsm.Tx) error {
			cursor := ""
			for page := 0; page < 1000; page++ {
				jobs, next, err := tx.ListJobs(fsm.JobQuery{Cursor: cursor, Limit: 500})
				if err != nil {
					return err
				}
				for _, j := range jobs {
					final = append(final, checker.FinalJob{ID: j.ID, State: string(j.State), IdempotencyKey: j.IdempotencyKey})
				}
				if next == "" {
					return nil
				}
				cursor = next
			}
			return errors.New("too many pages")
		})
		if err != nil {
			t.Fatalf("%s: listing: %v", nd.Name, err)
		}
		r := checker.QueuePresence(ops, final)
		t.Logf("%s: %v", nd.Name, r.Stats)
		if !r.Valid {
			t.Errorf("%s: %v", nd.Name, r)
		}
		if r.Stats["acknowledged"] == 0 {
			t.Errorf("%s: no submit was acknowledged; the test proved nothing", nd.Name)
		}
	}
}
