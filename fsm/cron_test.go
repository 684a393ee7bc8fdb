package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("zone %s unavailable on this host: %v", name, err)
	}
	return loc
}

// ticks lists the first n ticks after from.
func ticks(t *testing.T, spec, zone string, from time.Time, n int) []string {
	t.Helper()
	c, err := ParseCron(spec, zone)
	if err != nil {
		t.Fatalf("parse %q: %v", spec, err)
	}
	var out []string
	at := from
	for range n {
		at = c.Next(at, from)
		if at.IsZero() {
			out = append(out, "never")
			break
		}
		out = append(out, at.UTC().Format(time.RFC3339))
	}
	return out
}

func TestCronTicks(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	berlin := mustZone(t, "Europe/Berlin")
	for _, tc := range []struct {
		name, spec, zone string
		from             time.Time
		want             []string
	}{
		{"five fields", "*/15 * * * *", "", time.Date(2026, 1, 1, 0, 7, 0, 0, time.UTC),
			[]string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"}},
		{"seconds field", "*/20 * * * * *", "", time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC),
			[]string{"2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"}},
		{"descriptor", "@daily", "Asia/Tokyo", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			[]string{"2026-01-01T15:00:00Z", "2026-01-02T15:00:00Z"}},
		{"every counts from the anchor", "@every 90s", "", time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC),
			[]string{"2026-01-01T00:01:33Z", "2026-01-01T00:03:03Z"}},
		// Spring forward: 02:30 does not exist on 2026-03-08 in New York; it
		// fires once at 03:00 EDT (07:00Z), then daily as usual.
		{"dst gap fires at the end of the gap", "30 2 * * *", "America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, ny),
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"dst gap collapses ticks into one", "*/30 * * * *", "America/New_York", time.Date(2026, 3, 8, 1, 40, 0, 0, ny),
			[]string{"2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}},
		// Fall back: 01:30 happens twice on 2026-11-01; it fires once, EDT.
		{"repeated hour fires once", "30 1 * * *", "America/New_York", time.Date(2026, 10, 31, 12, 0, 0, 0, ny),
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"hourly across fall back", "0 * * * *", "America/New_York", time.Date(2026, 11, 1, 0, 30, 0, 0, ny),
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}},
		{"berlin spring forward", "30 2 * * *", "Europe/Berlin", time.Date(2026, 3, 28, 12, 0, 0, 0, berlin),
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"leap day", "0 0 29 2 *", "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"february 30 never fires", "0 0 30 2 *", "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			[]string{"never"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ticks(t, tc.spec, tc.zone, tc.from, len(tc.want))
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("%s in %q from %s:\n got %v\nwant %v", tc.spec, tc.zone, tc.from.UTC().Format(time.RFC3339), got, tc.want)
			}
		})
	}
}

// A tick read back as "after" must give the next tick, also from inside a
// repeated hour: every tick in a range comes out exactly once.
func TestCronTicksStrictlyIncrease(t *testing.T) {
	for _, zone := range []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "UTC"} {
		mustZone(t, zone)
		c, err := ParseCron("*/10 * * * *", zone)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		end := at.AddDate(1, 0, 0)
		n := 0
		for at.Before(end) {
			next := c.Next(at, at)
			if !next.After(at) {
				t.Fatalf("%s: Next(%v) = %v", zone, at, next)
			}
			at, n = next, n+1
		}
		// 6 per hour; DST days lose or keep an hour's worth (Lord Howe shifts by 30 min).
		if n < 365*24*6-12 || n > 365*24*6 {
			t.Errorf("%s: %d ticks in a year", zone, n)
		}
	}
}

func TestParseCronRefuses(t *testing.T) {
	for _, tc := range []struct{ spec, zone, field, why string }{
		{"", "", "cron", "empty"},
		{"* * *", "", "cron", "expected"},
		{"61 * * * *", "", "cron", "above"},
		{"@every 0s", "", "cron", "below the minimum"},
		{"@every 500ms", "", "cron", "below the minimum"},
		{"@every 1500ms", "", "cron", "whole number"},
		{"@every soon", "", "cron", "@every DURATION"},
		{"@fortnightly", "", "cron", "unrecognized"},
		{"TZ=UTC * * * * *", "", "cron", "time_zone"},
		{"* * * * *", "Mars/Olympus", "time_zone", "unknown zone"},
		{"* * * * *", "Local", "time_zone", "IANA"},
	} {
		_, err := ParseCron(tc.spec, tc.zone)
		var ce *CronError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Error(), tc.why) {
			t.Errorf("ParseCron(%q, %q) = %v, want a %s error mentioning %q", tc.spec, tc.zone, err, tc.field, tc.why)
		}
	}
}
