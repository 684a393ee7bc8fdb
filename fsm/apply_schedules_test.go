package fsm

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func testScheduleSpec(name string) ScheduleSpec {
	return ScheduleSpec{Name: name, Cron: "@every 10s", Job: JobSpec{Command: []string{"true"}, Priority: 50},
		Overlap: OverlapAllow, CatchUp: CatchUpLatest, MaxCatchUp: DefaultMaxCatchUp}
}

func (h *harness) schedule(name string) *Schedule {
	h.t.Helper()
	var s *Schedule
	if err := h.f.View(func(tx *Tx) (err error) { s, err = tx.Schedule(name); return err }); err != nil {
		h.t.Fatalf("schedule %s: %v", name, err)
	}
	return s
}

func fireOf(name string, tick time.Time, id string) FireSchedules {
	return FireSchedules{Fires: []Fire{{Schedule: name, Tick: tick, JobID: id}}}
}

func TestScheduleCreateAndRefuse(t *testing.T) {
	h := newHarness(t)
	h.must(CmdPutSchedule, PutSchedule{Schedule: testScheduleSpec("s"), Create: true})
	if r := h.apply(CmdPutSchedule, PutSchedule{Schedule: testScheduleSpec("s"), Create: true}); r.Err == nil || !strings.Contains(r.Err.Error(), "already exists") {
		t.Fatalf("duplicate create: %v", r.Err)
	}
	if r := h.apply(CmdPutSchedule, PutSchedule{Schedule: testScheduleSpec("nope")}); r.Err == nil {
		t.Fatalf("update of a missing schedule applied")
	}
	bad := []func(*ScheduleSpec){
		func(s *ScheduleSpec) { s.Name = "a/b" },
		func(s *ScheduleSpec) { s.Cron = "" },
		func(s *ScheduleSpec) { s.Overlap = "sometimes" },
		func(s *ScheduleSpec) { s.CatchUp = "most" },
		func(s *ScheduleSpec) { s.MaxCatchUp = -1 },
		func(s *ScheduleSpec) { a, b := t0, t0.Add(-time.Hour); s.StartAt, s.EndAt = &a, &b },
	}
	for i, f := range bad {
		sp := testScheduleSpec(fmt.Sprintf("bad%d", i))
		f(&sp)
		if r := h.apply(CmdPutSchedule, PutSchedule{Schedule: sp, Create: true}); r.Err == nil {
			t.Errorf("bad spec %d applied", i)
		}
	}
	if s := h.schedule("s"); !s.Cursor.Equal(t0) || !s.Anchor.Equal(t0) {
		t.Fatalf("cursor %v anchor %v, want %v", s.Cursor, s.Anchor, t0)
	}
}

func TestFireExactlyOncePerTick(t *testing.T) {
	h := newHarness(t)
	h.must(CmdPutSchedule, PutSchedule{Schedule: testScheduleSpec("s"), Create: true})
	tick := t0.Add(10 * time.Second)
	h.now = tick.Add(3 * time.Millisecond)
	r := h.must(CmdFireSchedules, fireOf("s", tick, "J1"))
	if len(r.Skipped) != 0 {
		t.Fatalf("first fire skipped: %v", r.Skipped)
	}
	j := h.job("J1")
	if j.State != JobQueued || j.Spec.Schedule != "s" || !j.Spec.ScheduledAt.Equal(tick) ||
		j.Spec.Env[EnvSchedule] != "s" || j.Spec.Env[EnvScheduledTime] != "2025-01-02T03:04:15Z" {
		t.Fatalf("fired job: %+v", j)
	}
	// The same tick again (a retried command, a new leader), an earlier
	// one, and a future one are all refused and create nothing.
	for _, f := range []FireSchedules{fireOf("s", tick, "J2"), fireOf("s", t0.Add(5*time.Second), "J3"), fireOf("s", h.now.Add(time.Second), "J4")} {
		r := h.must(CmdFireSchedules, f)
		if len(r.Skipped) != 1 {
			t.Fatalf("fire %+v not refused: %v", f, r.Skipped)
		}
	}
	for _, id := range []string{"J2", "J3", "J4"} {
		if err := h.f.View(func(tx *Tx) error { _, err := tx.Job(id); return err }); err == nil {
			t.Errorf("job %s was created", id)
		}
	}
	// Two ticks in one entry, in order, both fire.
	h.now = tick.Add(25 * time.Second)
	r = h.must(CmdFireSchedules, FireSchedules{Fires: []Fire{
		{Schedule: "s", Tick: tick.Add(10 * time.Second), JobID: "J5"},
		{Schedule: "s", Tick: tick.Add(20 * time.Second), JobID: "J6"},
		{Schedule: "s", Tick: tick.Add(10 * time.Second), JobID: "J7"},
	}})
	if len(r.Skipped) != 1 || r.Skipped[FireKey("s", tick.Add(10*time.Second))] == "" {
		t.Fatalf("skipped %v, want only the repeated tick", r.Skipped)
	}
	s := h.schedule("s")
	if s.Fired != 3 || len(s.History) != 3 || s.LastJob != "J6" || !s.Cursor.Equal(tick.Add(20*time.Second)) {
		t.Fatalf("schedule after fires: %+v", s)
	}
}

func TestFireOverlapPolicies(t *testing.T) {
	for _, pol := range []OverlapPolicy{OverlapAllow, OverlapForbid, OverlapReplace} {
		t.Run(string(pol), func(t *testing.T) {
			h := newHarness(t)
			sp := testScheduleSpec("s")
			sp.Overlap = pol
			h.must(CmdPutSchedule, PutSchedule{Schedule: sp, Create: true})
			h.now = t0.Add(20 * time.Second)
			h.must(CmdFireSchedules, fireOf("s", t0.Add(10*time.Second), "J1"))
			h.must(CmdFireSchedules, fireOf("s", t0.Add(20*time.Second), "J2"))
			s := h.schedule("s")
			last := s.History[len(s.History)-1]
			switch pol {
			case OverlapAllow:
				if last.JobID != "J2" || h.job("J1").State != JobQueued {
					t.Fatalf("allow: %+v, J1 %s", last, h.job("J1").State)
				}
			case OverlapForbid:
				if last.JobID != "" || !strings.Contains(last.Skipped, "overlap forbid") || s.Skipped != 1 || s.LastJob != "J1" {
					t.Fatalf("forbid: %+v", s)
				}
				if !s.Cursor.Equal(t0.Add(20 * time.Second)) {
					t.Fatalf("forbid must still decide the tick: cursor %v", s.Cursor)
				}
			case OverlapReplace:
				if last.JobID != "J2" || h.job("J1").State != JobCancelled || !strings.Contains(h.job("J1").Reason, "replaced") {
					t.Fatalf("replace: %+v, J1 %+v", last, h.job("J1"))
				}
			}
		})
	}
}

func TestFireManualPauseAndHistory(t *testing.T) {
	h := newHarness(t)
	h.must(CmdPutSchedule, PutSchedule{Schedule: testScheduleSpec("s"), Create: true})
	h.now = t0.Add(time.Second)
	h.must(CmdFireSchedules, FireSchedules{Fires: []Fire{{Schedule: "s", Tick: h.now, JobID: "M1", Manual: true}}})
	if s := h.schedule("s"); !s.History[0].Manual || !s.Cursor.Equal(t0) {
		t.Fatalf("manual fire moved the cursor or was not recorded: %+v", s)
	}
	h.must(CmdPauseSchedule, PauseSchedule{Name: "s", Paused: true})
	h.now = t0.Add(30 * time.Second)
	if r := h.must(CmdFireSchedules, fireOf("s", t0.Add(20*time.Second), "P1")); len(r.Skipped) != 1 {
		t.Fatalf("paused schedule fired")
	}
	h.must(CmdPauseSchedule, PauseSchedule{Name: "s", Paused: false})
	if r := h.must(CmdFireSchedules, fireOf("s", t0.Add(20*time.Second), "P2")); len(r.Skipped) != 1 {
		t.Fatalf("a tick from the pause fired after resume")
	}
	// History keeps the newest ScheduleHistoryMax records.
	for i := 1; i <= ScheduleHistoryMax+5; i++ {
		h.now = h.now.Add(10 * time.Second)
		h.must(CmdFireSchedules, FireSchedules{Fires: []Fire{{Schedule: "s", Tick: h.now, Skip: "missed", Count: 2}}})
	}
	s := h.schedule("s")
	if len(s.History) != ScheduleHistoryMax || !s.History[len(s.History)-1].Tick.Equal(h.now) || s.Skipped != 2*(ScheduleHistoryMax+5) {
		t.Fatalf("history %d records, skipped %d", len(s.History), s.Skipped)
	}
	h.must(CmdDeleteSchedule, DeleteSchedule{Name: "s"})
	if r := h.apply(CmdDeleteSchedule, DeleteSchedule{Name: "s"}); r.Err == nil {
		t.Fatalf("second delete applied")
	}
	if r := h.must(CmdFireSchedules, fireOf("s", h.now, "D1")); len(r.Skipped) != 1 {
		t.Fatalf("fire of a deleted schedule applied")
	}
}

func TestFireWindowAndUpdate(t *testing.T) {
	h := newHarness(t)
	sp := testScheduleSpec("s")
	start, end := t0.Add(time.Minute), t0.Add(2*time.Minute)
	sp.StartAt, sp.EndAt = &start, &end
	h.must(CmdPutSchedule, PutSchedule{Schedule: sp, Create: true})
	if s := h.schedule("s"); !s.Anchor.Equal(start) {
		t.Fatalf("anchor %v, want start_at", s.Anchor)
	}
	h.now = t0.Add(3 * time.Minute)
	r := h.must(CmdFireSchedules, FireSchedules{Fires: []Fire{
		{Schedule: "s", Tick: t0.Add(30 * time.Second), JobID: "A"},
		{Schedule: "s", Tick: t0.Add(150 * time.Second), JobID: "B"},
		{Schedule: "s", Tick: t0.Add(90 * time.Second), JobID: "C"},
	}})
	if len(r.Skipped) != 2 || r.Skipped[FireKey("s", t0.Add(90*time.Second))] != "" {
		t.Fatalf("window: skipped %v", r.Skipped)
	}
	sp.Cron, sp.StartAt, sp.EndAt = "@every 5s", nil, nil
	h.must(CmdPutSchedule, PutSchedule{Schedule: sp})
	s := h.schedule("s")
	if !s.Cursor.Equal(h.now) || !s.Anchor.Equal(h.now) || s.Fired != 1 || s.Spec.Cron != "@every 5s" {
		t.Fatalf("after update: %+v", s)
	}
}

// A fire is a schedule.fired event on the stream, carrying its job, and
// the job's timeline holds it next to job.submitted.
func TestFireEvent(t *testing.T) {
	h := newHarness(t)
	sub := h.f.Subscribe(64)
	defer sub.Close()
	h.must(CmdPutSchedule, PutSchedule{Schedule: testScheduleSpec("s"), Create: true})
	h.now = t0.Add(10 * time.Second)
	h.must(CmdFireSchedules, fireOf("s", t0.Add(10*time.Second), "J1"))
	var kinds []string
	for len(sub.C()) > 0 {
		e := <-sub.C()
		kinds = append(kinds, e.Kind()+":"+e.Schedule+":"+e.JobID)
	}
	want := "schedule.created:s: job.submitted::J1 schedule.fired:s:J1"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("events %q, want %q", strings.Join(kinds, " "), want)
	}
	var tl []Event
	if err := h.f.View(func(tx *Tx) (err error) { tl, err = tx.JobEvents("J1"); return err }); err != nil {
		t.Fatal(err)
	}
	if len(tl) != 2 || tl[1].Kind() != "schedule.fired" {
		t.Fatalf("timeline %+v", tl)
	}
}
