package sched

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

func (e *loopEnv) putSchedule(sp fsm.ScheduleSpec) {
	e.t.Helper()
	e.apply(fsm.CmdPutSchedule, &fsm.PutSchedule{Schedule: sp, Create: true})
}

func (e *loopEnv) schedule(name string) *fsm.Schedule {
	e.t.Helper()
	var s *fsm.Schedule
	if err := e.f.View(func(tx *fsm.Tx) (err error) { s, err = tx.Schedule(name); return err }); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// firedTicks lists the ticks of the jobs each schedule fired, in order.
func (e *loopEnv) firedTicks() map[string][]string {
	e.t.Helper()
	out := map[string][]string{}
	err := e.f.View(func(tx *fsm.Tx) error {
		jobs, _, err := tx.ListJobs(fsm.JobQuery{Limit: 100000})
		for _, j := range jobs {
			if j.Spec.Schedule != "" && j.Spec.Env[fsm.EnvScheduledTime] != "" {
				out[j.Spec.Schedule] = append(out[j.Spec.Schedule], j.Spec.ScheduledAt.UTC().Format("15:04:05"))
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

func every10(name string, policy fsm.CatchUpPolicy) fsm.ScheduleSpec {
	return fsm.ScheduleSpec{Name: name, Cron: "@every 10s", Job: fsm.JobSpec{Command: []string{"true"}, Priority: 50},
		Overlap: fsm.OverlapAllow, CatchUp: policy, MaxCatchUp: 100}
}

// The loop fires each tick once at its time, and a new leader (a new
// Run on the same state) fires the ticks it missed by policy, never one
// that was already fired.
func TestCronLoopFiresAndSurvivesFailover(t *testing.T) {
	e := newLoopEnv(t)
	for _, p := range []fsm.CatchUpPolicy{fsm.CatchUpSkip, fsm.CatchUpLatest, fsm.CatchUpAll} {
		e.putSchedule(every10(string(p), p))
	}
	_, stop := e.start(loopConfig())
	for i := 1; i <= 2; i++ {
		e.clk.Advance(10 * time.Second)
		eventually(t, fmt.Sprintf("tick %d fired", i), func() bool {
			f := e.firedTicks()
			return len(f["skip"]) == i && len(f["latest"]) == i && len(f["all"]) == i
		})
	}
	stop()                          // leadership lost; 3 ticks pass with no leader
	e.clk.Advance(37 * time.Second) // 12:00:57: 12:00:50 is 7s late, beyond CronGrace
	s2, stop2 := e.start(loopConfig())
	defer stop2()
	eventually(t, "catch-up after the failover", func() bool {
		return len(e.firedTicks()["all"]) == 5 && len(e.firedTicks()["latest"]) == 3
	})
	want := map[string]string{
		"skip":   "[12:00:10 12:00:20]",
		"latest": "[12:00:10 12:00:20 12:00:50]",
		"all":    "[12:00:10 12:00:20 12:00:30 12:00:40 12:00:50]",
	}
	for name, w := range want {
		if got := fmt.Sprint(e.firedTicks()[name]); got != w {
			t.Errorf("%s fired %s, want %s", name, got, w)
		}
	}
	if s := e.schedule("skip"); s.Skipped != 3 || !s.Cursor.Equal(t0.Add(50*time.Second)) {
		t.Errorf("skip: skipped %d cursor %v", s.Skipped, s.Cursor)
	}
	// Nothing more fires until the next tick.
	commits := s2.CronCommits()
	e.clk.Advance(2 * time.Second)
	time.Sleep(20 * time.Millisecond) // nothing to wait for: checking that nothing happens
	if s2.CronCommits() != commits {
		for _, c := range e.r.commands(fsm.CmdFireSchedules) {
			var p fsm.FireSchedules
			_ = c.DecodePayload(&p)
			t.Logf("%v %+v", c.At, p)
		}
		t.Fatalf("fire commands between ticks: %d", s2.CronCommits()-commits)
	}
	e.clk.Advance(time.Second)
	eventually(t, "the 12:01:00 tick", func() bool { return len(e.firedTicks()["skip"]) == 3 })
}

// Changes to schedules reach the loop: a new schedule, a pause, a delete.
func TestCronLoopFollowsChanges(t *testing.T) {
	e := newLoopEnv(t)
	_, stop := e.start(loopConfig())
	defer stop()
	e.putSchedule(every10("a", fsm.CatchUpLatest))
	e.putSchedule(every10("b", fsm.CatchUpLatest))
	e.clk.Advance(10 * time.Second)
	eventually(t, "both fired", func() bool { f := e.firedTicks(); return len(f["a"]) == 1 && len(f["b"]) == 1 })
	e.apply(fsm.CmdPauseSchedule, &fsm.PauseSchedule{Name: "a", Paused: true})
	e.apply(fsm.CmdDeleteSchedule, &fsm.DeleteSchedule{Name: "b"})
	e.putSchedule(every10("c", fsm.CatchUpLatest)) // anchored at 12:00:10
	e.clk.Advance(10 * time.Second)
	eventually(t, "c fired", func() bool { return len(e.firedTicks()["c"]) == 1 })
	e.apply(fsm.CmdPauseSchedule, &fsm.PauseSchedule{Name: "a", Paused: false})
	e.clk.Advance(10 * time.Second)
	eventually(t, "a fired after resume", func() bool { return len(e.firedTicks()["a"]) == 2 })
	f := e.firedTicks()
	if fmt.Sprint(f["a"]) != "[12:00:10 12:00:30]" || len(f["b"]) != 1 || fmt.Sprint(f["c"]) != "[12:00:20 12:00:30]" {
		t.Fatalf("fired %v", f)
	}
}
