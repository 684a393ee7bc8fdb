package fsm

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron is a parsed schedule spec in its zone: it says when the ticks are.
// The leader (sched) uses it to fire and the API to check specs and show
// the next fire; Apply never does, because the zone rules come from the
// host's tz database, which may differ between nodes.
//
// Parsing is robfig/cron/v3's (the parser most Go schedulers use, stable
// for years): five fields with an optional leading seconds field, and the
// @yearly/@monthly/@weekly/@daily/@hourly descriptors. Two things are ours:
//   - "@every D" counts whole seconds from the schedule's anchor (robfig
//     counts from whenever it is asked, which differs between leaders),
//     and D must be at least MinEvery;
//   - the zone. robfig evaluates in the zone directly, so a local time
//     skipped by a DST jump never fires that day and a repeated hour fires
//     twice. We evaluate the spec on the local wall clock instead and map
//     each wall time to an instant: a skipped time fires once at the first
//     valid instant after the gap, a repeated time fires once, at its first
//     occurrence (what cronie and Kubernetes do).
type Cron struct {
	every time.Duration
	wall  cron.Schedule // evaluated on a UTC clock that reads local wall time
	loc   *time.Location
}

// MinEvery is the shortest "@every" interval.
const MinEvery = time.Second

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// CronError says which field of a schedule is wrong and why.
type CronError struct {
	Field  string // "cron" or "time_zone"
	Reason string
}

func (e *CronError) Error() string { return e.Field + ": " + e.Reason }

// ParseCron parses spec in zone ("" = UTC). Errors are *CronError.
func ParseCron(spec, zone string) (*Cron, error) {
	loc, err := LoadZone(zone)
	if err != nil {
		return nil, err
	}
	spec = strings.TrimSpace(spec)
	bad := func(format string, args ...any) error {
		return &CronError{Field: "cron", Reason: fmt.Sprintf("%q: ", spec) + fmt.Sprintf(format, args...)}
	}
	switch {
	case spec == "":
		return nil, &CronError{Field: "cron", Reason: "empty"}
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return nil, bad("give the zone in time_zone, not in the spec")
	case strings.HasPrefix(spec, "@every"):
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(spec, "@every")))
		switch {
		case err != nil:
			return nil, bad("want @every DURATION, e.g. @every 30s (%v)", err)
		case d < MinEvery:
			return nil, bad("interval %s is below the minimum of %s", d, MinEvery)
		case d%time.Second != 0:
			return nil, bad("interval %s is not a whole number of seconds", d)
		}
		return &Cron{every: d, loc: loc}, nil
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, bad("%v", err)
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, bad("unsupported spec")
	}
	ss.Location = time.UTC // the wall clock (see Cron)
	return &Cron{wall: ss, loc: loc}, nil
}

// LoadZone loads an IANA zone ("" and "UTC" are UTC). "Local" is refused:
// it would mean a different zone on each node.
func LoadZone(zone string) (*time.Location, error) {
	if zone == "" || zone == "UTC" {
		return time.UTC, nil
	}
	if zone == "Local" {
		return nil, &CronError{Field: "time_zone", Reason: `"Local" differs between nodes; give an IANA name such as Europe/Berlin`}
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, &CronError{Field: "time_zone", Reason: fmt.Sprintf("unknown zone %q (want an IANA name such as America/New_York)", zone)}
	}
	return loc, nil
}

// Every is the interval of an "@every" spec, or 0.
func (c *Cron) Every() time.Duration { return c.every }

// Location is the zone the spec is evaluated in.
func (c *Cron) Location() *time.Location { return c.loc }

// Next returns the first tick strictly after after, or the zero time if
// there is none (a spec such as "0 0 30 2 *" never fires). anchor is where
// "@every" intervals count from (Schedule.Anchor).
func (c *Cron) Next(after, anchor time.Time) time.Time {
	if c.every > 0 {
		if after.Before(anchor) {
			return anchor
		}
		n := after.Sub(anchor)/c.every + 1
		return anchor.Add(n * c.every)
	}
	w := wallOf(after, c.loc)
	// A wall tick can map to an instant at or before after (a repeated
	// hour's first occurrence, a gap collapsed onto its end): move on.
	for range 10000 {
		w = c.wall.Next(w)
		if w.IsZero() {
			return time.Time{}
		}
		if t := instantOf(w, c.loc); t.After(after) {
			return t
		}
	}
	return time.Time{}
}

// wallOf is t's local wall-clock reading in loc, as a UTC time.
func wallOf(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

func offsetAt(unix int64, loc *time.Location) int64 {
	_, o := time.Unix(unix, 0).In(loc).Zone()
	return int64(o)
}

// instantOf maps a wall-clock reading (as UTC) to the instant it names in
// loc: the first occurrence of a repeated reading, and for a reading in a
// gap (spring forward) the first instant after the gap.
func instantOf(w time.Time, loc *time.Location) time.Time {
	if loc == time.UTC {
		return w
	}
	ws, ns := w.Unix(), int64(w.Nanosecond())
	// Offsets a day either side bracket any transition near w.
	oA, oB := offsetAt(ws-86400, loc), offsetAt(ws+86400, loc)
	var best int64
	found := false
	for _, o := range []int64{oA, oB} {
		if u := ws - o; offsetAt(u, loc) == o && (!found || u < best) {
			best, found = u, true
		}
	}
	if found {
		return time.Unix(best, ns).UTC()
	}
	if oB <= oA {
		// Not a plain gap (two transitions within two days): take Go's
		// normalisation.
		return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc).UTC()
	}
	// A gap: the transition lies in (ws-oB, ws-oA]; find it to the second.
	lo, hi := ws-oB, ws-oA
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if offsetAt(mid, loc) == oA {
			lo = mid
		} else {
			hi = mid
		}
	}
	return time.Unix(hi, 0).UTC()
}
