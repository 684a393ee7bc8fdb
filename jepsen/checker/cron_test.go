package checker

import (
	"fmt"
	"testing"
	"time"
)

func TestCronChecker(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	scheds := []CronSchedule{
		{Name: "all", Cron: "@every 1s", CatchUp: "all", Overlap: "allow", Anchor: t0, Cursor: t0},
		{Name: "forbid", Cron: "@every 1s", CatchUp: "latest", Overlap: "forbid", Anchor: t0, Cursor: t0},
	}
	opt := CronOptions{End: t0.Add(3500 * time.Millisecond), ClockBound: time.Millisecond, TickBound: time.Second}
	// A valid history: "all" fired 1..3 s, "forbid" jobs one after another.
	base := func() ([]CronFire, []Record) {
		var fires []CronFire
		var recs []Record
		for i := 1; i <= 3; i++ {
			tick := t0.Add(time.Duration(i) * time.Second)
			id := fmt.Sprintf("A%d", i)
			fires = append(fires, CronFire{Job: id, Schedule: "all", Tick: tick})
			recs = append(recs, Record{Kind: "start", Job: id, At: tick.Add(20 * time.Millisecond).UnixNano()},
				Record{Kind: "end", Job: id, At: tick.Add(2 * time.Second).UnixNano()})
		}
		for _, i := range []int{1, 3} {
			tick := t0.Add(time.Duration(i) * time.Second)
			id := fmt.Sprintf("F%d", i)
			fires = append(fires, CronFire{Job: id, Schedule: "forbid", Tick: tick})
			recs = append(recs, Record{Kind: "start", Job: id, At: tick.Add(10 * time.Millisecond).UnixNano()},
				Record{Kind: "end", Job: id, At: tick.Add(1500 * time.Millisecond).UnixNano()})
		}
		return fires, recs
	}
	valid := func(rs []Result) map[string]bool {
		m := map[string]bool{}
		for _, r := range rs {
			m[r.Name] = r.Valid
		}
		return m
	}
	fires, recs := base()
	for name, ok := range valid(Cron(scheds, fires, recs, opt)) {
		if !ok {
			t.Errorf("valid history: %s failed", name)
		}
	}
	for _, tc := range []struct {
		name, check string
		mut         func(f []CronFire, r []Record) ([]CronFire, []Record)
	}{
		{"tick fired twice", "cron-once", func(f []CronFire, r []Record) ([]CronFire, []Record) {
			return append(f, CronFire{Job: "A9", Schedule: "all", Tick: t0.Add(2 * time.Second)}), r
		}},
		{"not a tick", "cron-once", func(f []CronFire, r []Record) ([]CronFire, []Record) {
			return append(f, CronFire{Job: "F9", Schedule: "forbid", Tick: t0.Add(2500 * time.Millisecond)}), r
		}},
		{"missed tick under all", "cron-catch-up", func(f []CronFire, r []Record) ([]CronFire, []Record) {
			return f[1:], r
		}},
		{"forbid overlapped", "cron-forbid", func(f []CronFire, r []Record) ([]CronFire, []Record) {
			tick := t0.Add(2 * time.Second)
			return append(f, CronFire{Job: "F2", Schedule: "forbid", Tick: tick}),
				append(r, Record{Kind: "start", Job: "F2", At: tick.UnixNano()}, Record{Kind: "end", Job: "F2", At: tick.Add(100 * time.Millisecond).UnixNano()})
		}},
		{"started before its tick", "cron-early", func(f []CronFire, r []Record) ([]CronFire, []Record) {
			return f, append(r, Record{Kind: "start", Job: "A1", At: t0.Add(500 * time.Millisecond).UnixNano()})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, r := base()
			f, r = tc.mut(f, r)
			if valid(Cron(scheds, f, r, opt))[tc.check] {
				t.Fatalf("%s passed", tc.check)
			}
		})
	}
}
