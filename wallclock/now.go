//go:build !jepsenclock

package wallclock

import "time"

// Now returns the current wall-clock time (with its monotonic reading).
func Now() time.Time { return time.Now() }

// Hooked reports whether this binary carries the jepsen clock hook.
const Hooked = false

// Offset is the offset applied to Now: always zero without the hook.
func Offset() time.Duration { return 0 }
