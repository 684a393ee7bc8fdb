package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"time"
)

// Retry policy defaults, used when a job's spec leaves them zero (jitter
// has no default here: zero means no jitter).
const (
	DefaultMaxAttempts       = 3
	DefaultBackoffInitial    = time.Second
	DefaultBackoffMultiplier = 2.0
	DefaultBackoffMax        = 5 * time.Minute
)

// MaxAttemptsOf returns the spec's attempt budget with the default applied.
func MaxAttemptsOf(s *JobSpec) int {
	if s.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return s.MaxAttempts
}

// RetryDelay is the wait before the attempt after the n-th counted failure
// (n >= 1): min(Initial*Multiplier^(n-1), Max) plus a jitter of up to
// ±Jitter*delay derived from a hash of the job ID and n. It is a pure
// function, so every node computes the same NextRunAt: only IEEE
// multiplication (no math.Pow, whose assembly varies by platform) and
// integer arithmetic.
func RetryDelay(jobID string, n int, b Backoff) time.Duration {
	initial, mult, maxD, jitter := b.Initial.D(), b.Multiplier, b.Max.D(), b.Jitter
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	if mult < 1 {
		mult = DefaultBackoffMultiplier
	}
	if maxD <= 0 {
		maxD = DefaultBackoffMax
	}
	// Zero jitter means none: the API fills in the default (0.2) when the
	// user gives no value, so an explicit 0 must stay 0.
	jitter = min(max(jitter, 0), 1)
	d := float64(initial)
	for i := 1; i < n && d < float64(maxD); i++ {
		d = float64(d * mult) // the conversion forbids fused multiply-add
	}
	delay := maxD
	if d < float64(maxD) {
		delay = time.Duration(d)
	}
	span := int64(float64(float64(delay) * jitter))
	if span <= 0 {
		return delay
	}
	sum := sha256.Sum256([]byte(jobID + "/" + strconv.Itoa(n)))
	h := binary.BigEndian.Uint64(sum[:8])
	off := int64(h%uint64(2*span+1)) - span
	return max(delay+time.Duration(off), 0)
}
