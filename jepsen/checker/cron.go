package checker

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// CronSchedule is one schedule of the cron workload as created.
type CronSchedule struct {
	Name, Cron, Zone string
	CatchUp, Overlap string
	// Anchor and Cursor are the record's at creation: ticks after Cursor
	// are the schedule's to fire.
	Anchor, Cursor time.Time
}

// CronFire is one job a schedule fired, for its tick.
type CronFire struct {
	Job, Schedule string
	Tick          time.Time
}

// CronOptions bound the cron checks.
type CronOptions struct {
	// End is the host time after which ticks are not required to have
	// fired (the end of the run; the drain waited for the cursors).
	End time.Time
	// Ahead is the largest clock offset ahead of true time a node had: a
	// leader that far ahead fires that much early.
	Ahead time.Duration
	// ClockBound is the error of comparing records with the harness clock.
	ClockBound time.Duration
	// TickBound is how long an execution killed without an end record may
	// have run after its last record.
	TickBound time.Duration
}

// Cron checks invariant 3 and the policies over the fired jobs and the
// probe records of their executions:
//   - cron-once: no (schedule, tick) fired twice, and every fired tick is a
//     tick of the schedule's spec after its creation;
//   - cron-catch-up: a catch_up all schedule fired every tick from its
//     creation to End;
//   - cron-forbid: the executions of an overlap forbid schedule's jobs
//     never overlap;
//   - cron-early: no job started before its tick by more than Ahead +
//     ClockBound (lateness is reported, not failed).
func Cron(scheds []CronSchedule, fires []CronFire, exec []Record, opt CronOptions) []Result {
	once := Result{Name: "cron-once", Valid: true, Stats: map[string]int{}}
	all := Result{Name: "cron-catch-up", Valid: true, Stats: map[string]int{}}
	forbid := Result{Name: "cron-forbid", Valid: true, Stats: map[string]int{}}
	early := Result{Name: "cron-early", Valid: true, Stats: map[string]int{}}

	byName := map[string]CronSchedule{}
	for _, s := range scheds {
		byName[s.Name] = s
	}
	ticks := map[string]map[int64][]string{} // schedule → tick → jobs
	jobTick := map[string]time.Time{}
	for _, f := range fires {
		if ticks[f.Schedule] == nil {
			ticks[f.Schedule] = map[int64][]string{}
		}
		k := f.Tick.UnixNano()
		ticks[f.Schedule][k] = append(ticks[f.Schedule][k], f.Job)
		jobTick[f.Job] = f.Tick
		once.Stats["fired"]++
	}
	for _, name := range slices.Sorted(maps.Keys(ticks)) {
		s, known := byName[name]
		var c *fsm.Cron
		if known {
			c, _ = fsm.ParseCron(s.Cron, s.Zone)
		}
		for _, k := range slices.Sorted(maps.Keys(ticks[name])) {
			jobs := ticks[name][k]
			tick := time.Unix(0, k).UTC()
			if len(jobs) > 1 {
				once.errorf("schedule %s tick %s fired %d times: jobs %v", name, tick.Format(time.RFC3339Nano), len(jobs), jobs)
			}
			if c != nil && !tick.After(s.Cursor) {
				once.errorf("schedule %s fired tick %s, not after its creation (cursor %s)", name, tick.Format(time.RFC3339Nano), s.Cursor.Format(time.RFC3339Nano))
			} else if c != nil && !c.Next(tick.Add(-time.Nanosecond), s.Anchor).Equal(tick) {
				once.errorf("schedule %s fired %s, which is not a tick of %q in %q", name, tick.Format(time.RFC3339Nano), s.Cron, s.Zone)
			}
		}
	}

	for _, s := range scheds {
		if s.CatchUp != string(fsm.CatchUpAll) {
			continue
		}
		c, err := fsm.ParseCron(s.Cron, s.Zone)
		if err != nil {
			all.errorf("schedule %s: %v", s.Name, err)
			continue
		}
		for t := c.Next(s.Cursor, s.Anchor); !t.IsZero() && !t.After(opt.End); t = c.Next(t, s.Anchor) {
			all.Stats["ticks"]++
			if len(ticks[s.Name][t.UnixNano()]) == 0 {
				all.Stats["missing"]++
				all.errorf("schedule %s (catch_up all) never fired tick %s", s.Name, t.Format(time.RFC3339Nano))
			}
		}
	}

	// Executions per job: first start, certain end (the end record, else
	// the last record) and possible end (+TickBound without an end).
	type span struct {
		job               string
		start, end, maybe int64
		ended             bool
		tick              time.Time
		schedule, overlap string
	}
	spans := map[string]*span{}
	for _, r := range exec {
		tick, ok := jobTick[r.Job]
		if !ok {
			continue
		}
		sp := spans[r.Job]
		if sp == nil {
			sp = &span{job: r.Job, start: r.At, end: r.At, tick: tick}
			spans[r.Job] = sp
		}
		sp.start, sp.end = min(sp.start, r.At), max(sp.end, r.At)
		if r.Kind == "end" {
			sp.ended = true
		}
	}
	var lateness []int64
	perSched := map[string][]*span{}
	for _, f := range fires {
		sp := spans[f.Job]
		if sp == nil {
			early.Stats["never_started"]++
			continue
		}
		sp.maybe = sp.end
		if !sp.ended {
			sp.maybe += int64(opt.TickBound)
		}
		perSched[f.Schedule] = append(perSched[f.Schedule], sp)
		d := time.Duration(sp.start - f.Tick.UnixNano())
		switch {
		case -d > opt.Ahead+opt.ClockBound:
			early.errorf("job %s of %s started %v before its tick %s; the largest clock offset ahead was %v",
				f.Job, f.Schedule, (-d).Round(time.Millisecond), f.Tick.Format(time.RFC3339Nano), opt.Ahead)
		case -d > opt.ClockBound:
			early.Stats["early_within_skew"]++
		default:
			lateness = append(lateness, int64(d))
		}
	}
	if len(lateness) > 0 {
		sort.Slice(lateness, func(i, j int) bool { return lateness[i] < lateness[j] })
		early.Stats["started"] = len(lateness)
		early.Stats["median_late_ms"] = int(time.Duration(lateness[len(lateness)/2]).Milliseconds())
		early.Stats["p99_late_ms"] = int(time.Duration(lateness[len(lateness)*99/100]).Milliseconds())
		early.Stats["max_late_ms"] = int(time.Duration(lateness[len(lateness)-1]).Milliseconds())
	}

	for _, s := range scheds {
		if s.Overlap != string(fsm.OverlapForbid) {
			continue
		}
		sps := perSched[s.Name]
		sort.Slice(sps, func(i, j int) bool { return sps[i].start < sps[j].start })
		forbid.Stats["jobs"] += len(sps)
		for i := 1; i < len(sps); i++ {
			prev, cur := sps[i-1], sps[i]
			switch {
			case cur.start < prev.end-int64(opt.ClockBound):
				forbid.errorf("schedule %s (overlap forbid): job %s (tick %s) started while job %s (tick %s) was running",
					s.Name, cur.job, cur.tick.Format(time.RFC3339), prev.job, prev.tick.Format(time.RFC3339))
			case cur.start < prev.maybe:
				forbid.Stats["possible_overlaps"]++
				forbid.notef("schedule %s: job %s started %v after job %s's last record, which has no end record",
					s.Name, cur.job, time.Duration(cur.start-prev.end).Round(time.Millisecond), prev.job)
			}
		}
	}
	return []Result{once, all, forbid, early}
}
