package wallclock

import (
	"time"
	"unsafe"
)

// timeLayout mirrors time.Time's fields (Go 1.9 to at least 1.26): wall
// holds the hasMonotonic flag, 33 bits of seconds and 30 of nanoseconds;
// ext holds the monotonic reading when the flag is set. TestShift fails if
// the layout ever changes.
type timeLayout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const hasMonotonic = 1 << 63

// Shift moves t's wall-clock reading by d and keeps its monotonic reading,
// which time.Time.Add cannot do (it moves both). Comparisons of the result
// with another reading that has a monotonic part (Sub, Before: lease and
// contact arithmetic) are unchanged; its wall time (what is stamped and
// compared with run_at, once encoded) is off by d. When t has no monotonic
// reading this is t.Add(d).
func Shift(t time.Time, d time.Duration) time.Time {
	s := t.Add(d)
	if d == 0 {
		return s
	}
	src := (*timeLayout)(unsafe.Pointer(&t))
	dst := (*timeLayout)(unsafe.Pointer(&s))
	if src.wall&hasMonotonic != 0 && dst.wall&hasMonotonic != 0 {
		dst.ext = src.ext
	}
	return s
}
