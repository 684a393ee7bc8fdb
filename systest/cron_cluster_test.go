package systest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/sched"
	"github.com/foreman-sched/foreman/wallclock"
)

// runScheduler runs the leader loop (cron included) on nd while it leads,
// as the agent does.
func runScheduler(t *testing.T, nd *clustertest.Node) {
	live := nd.Live()
	live.OnLeadership(func(ctx context.Context) {
		s, err := sched.New(sched.DefaultConfig(), sched.Deps{Raft: live, State: nd.FSM}, nil)
		if err != nil {
			t.Error(err)
			return
		}
		_ = s.Run(ctx)
	})
}

// firedTicks counts the jobs schedule name fired, per tick, on nd.
func firedTicks(t *testing.T, nd *clustertest.Node, name string) map[time.Time]int {
	t.Helper()
	out := map[time.Time]int{}
	err := nd.FSM.View(func(tx *fsm.Tx) error {
		jobs, _, err := tx.ListJobs(fsm.JobQuery{Limit: 1 << 20})
		for _, j := range jobs {
			if j.Spec.Schedule == name && j.Spec.ScheduledAt != nil {
				out[j.Spec.ScheduledAt.UTC()]++
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The leader is killed right at a tick, twice: every tick from the first
// fire to the last fires exactly once (catch_up all), whichever leader
// proposed it and whether or not the dying leader's fire was committed.
func TestCronLeaderKilledAtTickFiresOnce(t *testing.T) {
	c := clustertest.NewCluster(t, 3, clustertest.Options{})
	for _, nd := range c.Nodes() {
		runScheduler(t, nd)
	}
	leader := c.WaitForLeader()
	sp := fsm.ScheduleSpec{Name: "every-second", Cron: "@every 1s", Job: fsm.JobSpec{Command: []string{"true"}, Priority: 50},
		Overlap: fsm.OverlapAllow, CatchUp: fsm.CatchUpAll, MaxCatchUp: 100}
	cmd, err := fsm.NewCommand(fsm.CmdPutSchedule, wallclock.Now(), &fsm.PutSchedule{Schedule: sp, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := leader.Apply(context.Background(), cmd); err != nil || res.Err != nil {
		t.Fatalf("create schedule: %v %v", err, res)
	}
	var anchor time.Time
	_ = leader.FSM.View(func(tx *fsm.Tx) error { s, err := tx.Schedule(sp.Name); anchor = s.Anchor; return err })

	for round := range 2 {
		leader = c.WaitForLeader()
		c.Eventually(clustertest.LeaderTimeout, "ticks firing", func() error {
			if n := len(firedTicks(t, leader, sp.Name)); n < 2*(round+1) {
				return fmt.Errorf("%d ticks fired", n)
			}
			return nil
		})
		// Kill the leader right at the next tick (not a synchronisation:
		// the fault is placed on the tick).
		next := anchor.Add(time.Duration(wallclock.Now().Sub(anchor)/time.Second+1) * time.Second)
		time.Sleep(time.Until(next))
		c.Kill(leader.Index)
		c.WaitForLeader()
		c.Restart(leader.Index)
		runScheduler(t, c.Node(leader.Index))
	}
	leader = c.WaitForLeader()
	var last time.Time
	c.Eventually(clustertest.LeaderTimeout, "ticks after the last failover", func() error {
		last = wallclock.Now().Add(-time.Second)
		ticks := firedTicks(t, leader, sp.Name)
		if !ticksCover(ticks, last) {
			return fmt.Errorf("%d ticks so far", len(ticks))
		}
		return nil
	})
	c.WaitConverged()
	for _, nd := range c.Live() {
		ticks := firedTicks(t, nd, sp.Name)
		keys := make([]time.Time, 0, len(ticks))
		for k, n := range ticks {
			if n != 1 {
				t.Errorf("%s: tick %s fired %d times", nd.Name, k.Format(time.RFC3339), n)
			}
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].Before(keys[j]) })
		for i := 1; i < len(keys); i++ {
			if d := keys[i].Sub(keys[i-1]); d != time.Second {
				t.Errorf("%s: ticks %s and %s are %s apart: a tick was lost", nd.Name, keys[i-1].Format(time.RFC3339), keys[i].Format(time.RFC3339), d)
			}
		}
		if len(keys) == 0 || keys[0].Sub(anchor) > 2*time.Second {
			t.Errorf("%s: first fired tick %v, schedule anchored at %v", nd.Name, keys, anchor)
		}
	}
}

// ticksCover reports whether some tick at or after until has fired.
func ticksCover(ticks map[time.Time]int, until time.Time) bool {
	for k := range ticks {
		if !k.Before(until) {
			return true
		}
	}
	return false
}
