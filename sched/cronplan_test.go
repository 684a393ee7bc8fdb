package sched

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

func cronSchedule(t *testing.T, spec string, policy fsm.CatchUpPolicy, maxCatchUp int, cursor time.Time) (*fsm.Schedule, *fsm.Cron) {
	t.Helper()
	c, err := fsm.ParseCron(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	return &fsm.Schedule{Spec: fsm.ScheduleSpec{Name: "s", Cron: spec, CatchUp: policy, MaxCatchUp: maxCatchUp},
		Anchor: t0, Cursor: cursor}, c
}

// fireString renders fires as "HH:MM:SS" (fired) or "skip<n>@HH:MM:SS".
func fireString(fires []fsm.Fire) string {
	var out []string
	for _, f := range fires {
		s := f.Tick.UTC().Format("15:04:05")
		if f.Skip != "" {
			s = fmt.Sprintf("skip%d@%s", f.Count, s)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestDueFiresPolicies(t *testing.T) {
	grace := 5 * time.Second
	for _, tc := range []struct {
		name   string
		spec   string
		policy fsm.CatchUpPolicy
		max    int
		cursor time.Time
		now    time.Time
		want   string
		next   string
	}{
		{"nothing due", "@every 10s", fsm.CatchUpLatest, 100, t0, t0.Add(9 * time.Second), "", "12:00:10"},
		{"on time", "@every 10s", fsm.CatchUpLatest, 100, t0, t0.Add(10*time.Second + time.Millisecond), "12:00:10", "12:00:20"},
		{"on time under skip", "@every 10s", fsm.CatchUpSkip, 100, t0, t0.Add(12 * time.Second), "12:00:10", "12:00:20"},
		{"late beyond grace under skip", "@every 10s", fsm.CatchUpSkip, 100, t0, t0.Add(16 * time.Second), "skip1@12:00:10", "12:00:20"},
		{"downtime under skip", "@every 10s", fsm.CatchUpSkip, 100, t0, t0.Add(51 * time.Second), "skip4@12:00:40 12:00:50", "12:01:00"},
		{"downtime under latest", "@every 10s", fsm.CatchUpLatest, 100, t0, t0.Add(59 * time.Second), "skip4@12:00:40 12:00:50", "12:01:00"},
		{"downtime under all", "@every 10s", fsm.CatchUpAll, 100, t0, t0.Add(59 * time.Second), "12:00:10 12:00:20 12:00:30 12:00:40 12:00:50", "12:01:00"},
		{"all beyond max_catch_up", "@every 10s", fsm.CatchUpAll, 2, t0, t0.Add(59 * time.Second), "12:00:10 12:00:20 skip3@12:00:50", "12:01:00"},
		{"cursor hides decided ticks", "@every 10s", fsm.CatchUpAll, 100, t0.Add(30 * time.Second), t0.Add(59 * time.Second), "12:00:40 12:00:50", "12:01:00"},
		{"cron spec downtime", "*/5 * * * *", fsm.CatchUpLatest, 100, t0, t0.Add(21 * time.Minute), "skip3@12:15:00 12:20:00", "12:25:00"},
		{"long downtime is bounded", "@every 1s", fsm.CatchUpLatest, 100, t0, t0.Add(24 * time.Hour), "skip86399@11:59:59 12:00:00", "12:00:01"},
		{"long downtime cron spec", "* * * * * *", fsm.CatchUpSkip, 100, t0, t0.Add(3 * time.Hour), "skip9999@14:59:59 15:00:00", "15:00:01"}, // a lower bound,
		{"never fires", "0 0 30 2 *", fsm.CatchUpLatest, 100, t0, t0.Add(time.Hour), "", "never"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := cronSchedule(t, tc.spec, tc.policy, tc.max, tc.cursor)
			fires, next := DueFires(s, c, tc.now, grace)
			if got := fireString(fires); got != tc.want {
				t.Errorf("fires %q, want %q", got, tc.want)
			}
			gotNext := "never"
			if !next.IsZero() {
				gotNext = next.UTC().Format("15:04:05")
			}
			if gotNext != tc.next {
				t.Errorf("next %s, want %s", gotNext, tc.next)
			}
			prev := tc.cursor
			for _, f := range fires {
				if !f.Tick.After(prev) || f.Tick.After(tc.now) || f.Schedule != "s" {
					t.Errorf("fire %+v out of order or not due (after %v, now %v)", f, prev, tc.now)
				}
				prev = f.Tick
			}
		})
	}
}

func TestDueFiresWindowAndPause(t *testing.T) {
	s, c := cronSchedule(t, "@every 10s", fsm.CatchUpAll, 100, t0)
	start, end := t0.Add(25*time.Second), t0.Add(45*time.Second)
	s.Spec.StartAt, s.Spec.EndAt = &start, &end
	fires, next := DueFires(s, c, t0.Add(time.Minute), time.Second)
	if got := fireString(fires); got != "12:00:30 12:00:40" || !next.IsZero() {
		t.Fatalf("window: %q next %v", got, next)
	}
	// A start_at on a tick fires that tick.
	s.Spec.StartAt = &[]time.Time{t0.Add(20 * time.Second)}[0]
	if fires, _ := DueFires(s, c, t0.Add(21*time.Second), time.Second); fireString(fires) != "12:00:20" {
		t.Fatalf("start_at on a tick: %q", fireString(fires))
	}
	s.Spec.Paused = true
	if fires, next := DueFires(s, c, t0.Add(time.Minute), time.Second); len(fires) != 0 || !next.IsZero() {
		t.Fatalf("paused schedule: %v next %v", fires, next)
	}
}
