package sched

import (
	"fmt"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// maxTickScan bounds the due ticks one wake enumerates for a schedule (a
// leader down for a day under "@every 1s" misses 86,400); past it the
// last tick is found by a search and the skipped count is a lower bound.
const maxTickScan = 10000

// DueFires is what schedule s (its spec parsed as c) must decide at now:
// the fires of its due ticks (after its cursor, within start_at/end_at, at
// or before now) under its catch-up policy, oldest first, without job IDs
// (the loop mints them), and the next tick after those (zero: none). A
// pure function of the record and now; Apply re-checks every fire.
//
// A due tick is on time when it is the latest one and at most grace old;
// any other due tick was missed (downtime, a leader change, a late wake):
//   - skip: the on-time tick fires, missed ones are recorded skipped;
//   - latest: the latest due tick fires, earlier ones are skipped;
//   - all: the oldest MaxCatchUp due ticks fire, oldest first; the rest are
//     recorded skipped.
func DueFires(s *fsm.Schedule, c *fsm.Cron, now time.Time, grace time.Duration) ([]fsm.Fire, time.Time) {
	sp := &s.Spec
	if sp.Paused {
		return nil, time.Time{}
	}
	from := s.DecidedThrough()
	end := now
	if sp.EndAt != nil && sp.EndAt.Before(end) {
		end = *sp.EndAt
	}
	var due []time.Time
	more := false
	for t := from; ; {
		t = c.Next(t, s.Anchor)
		if t.IsZero() || t.After(end) {
			break
		}
		if len(due) == maxTickScan {
			more = true
			break
		}
		due = append(due, t)
	}
	if len(due) == 0 {
		return nil, nextTick(s, c, from)
	}
	last := due[len(due)-1]
	if more {
		last = lastTick(c, s.Anchor, last, end)
	}
	n := len(due) // with more: a lower bound, exact for @every
	if e := c.Every(); more && e > 0 {
		n = int(last.Sub(due[0])/e) + 1
	}
	name := s.Spec.Name
	var fires []fsm.Fire
	skipTo := func(tick time.Time, count int, why string) {
		if count > 0 {
			fires = append(fires, fsm.Fire{Schedule: name, Tick: tick, Skip: why, Count: count})
		}
	}
	fire := func(tick time.Time) { fires = append(fires, fsm.Fire{Schedule: name, Tick: tick}) }
	// before is the tick before last, where a run of missed ticks ends.
	before := func() time.Time {
		if !more {
			return due[max(n-2, 0)]
		}
		return lastTick(c, s.Anchor, due[len(due)-1], last.Add(-time.Nanosecond))
	}
	switch sp.CatchUp {
	case fsm.CatchUpSkip:
		if now.Sub(last) <= grace {
			skipTo(before(), n-1, "missed (catch_up skip)")
			fire(last)
		} else {
			skipTo(last, n, "missed (catch_up skip)")
		}
	case fsm.CatchUpAll:
		k := min(n, len(due), max(sp.MaxCatchUp, 0))
		for _, t := range due[:k] {
			fire(t)
		}
		skipTo(last, n-k, fmt.Sprintf("missed beyond max_catch_up %d", sp.MaxCatchUp))
	default: // latest
		skipTo(before(), n-1, "missed (catch_up latest)")
		fire(last)
	}
	return fires, nextTick(s, c, last)
}

// nextTick is the schedule's first tick after t within end_at, or zero.
func nextTick(s *fsm.Schedule, c *fsm.Cron, t time.Time) time.Time {
	if s.Spec.Paused {
		return time.Time{}
	}
	n := c.Next(t, s.Anchor)
	if n.IsZero() || (s.Spec.EndAt != nil && n.After(*s.Spec.EndAt)) {
		return time.Time{}
	}
	return n
}

// lastTick finds the last tick at or before end, knowing one at known.
func lastTick(c *fsm.Cron, anchor, known, end time.Time) time.Time {
	if e := c.Every(); e > 0 {
		return anchor.Add(end.Sub(anchor) / e * e)
	}
	for w := time.Hour; ; w *= 24 {
		start := end.Add(-w)
		if !start.After(known) {
			start = known.Add(-time.Nanosecond)
		}
		var last time.Time
		for t := c.Next(start, anchor); !t.IsZero() && !t.After(end); t = c.Next(t, anchor) {
			last = t
		}
		if !last.IsZero() {
			return last
		}
	}
}
