package wallclock

import (
	"testing"
	"time"
)

func TestShift(t *testing.T) {
	for _, d := range []time.Duration{0, 1500 * time.Millisecond, -3 * time.Minute, 4*time.Minute + 7} {
		t.Run(d.String(), func(t *testing.T) {
			now := time.Now()
			s := Shift(now, d)
			if got := s.Round(0).Sub(now.Round(0)); got != d {
				t.Fatalf("wall moved by %v, want %v", got, d)
			}
			// Monotonic readings are compared when both have one: unchanged.
			if got := s.Sub(now); got != 0 {
				t.Fatalf("monotonic moved by %v, want 0", got)
			}
			later := now.Add(time.Second)
			if !s.Before(later) || !later.After(s) {
				t.Fatalf("monotonic order lost: %v vs %v", s, later)
			}
			if s.Location() != now.Location() {
				t.Fatalf("location changed")
			}
		})
	}
	// Without a monotonic reading Shift is Add.
	w := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	if got := Shift(w, time.Minute); !got.Equal(w.Add(time.Minute)) {
		t.Fatalf("got %v", got)
	}
}

func TestNowIsWallClock(t *testing.T) {
	before := time.Now()
	n := Now()
	if Hooked && Offset() != 0 {
		t.Skip("an offset is set")
	}
	if n.Sub(before) < 0 || n.Round(0).Sub(before.Round(0)) > time.Minute {
		t.Fatalf("Now %v far from time.Now %v", n, before)
	}
}
