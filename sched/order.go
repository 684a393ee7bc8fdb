package sched

import (
	"slices"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// EffectivePriority is the job's priority plus one per AgingInterval it
// has waited since it became runnable (submission, or NextRunAt for a
// run_at or retry), capped at AgingCap. Aging is what keeps a stream of
// high-priority work from starving priority 0 forever; a submitted
// priority above the cap is kept as is.
func EffectivePriority(j *fsm.Job, now time.Time, cfg Config) int {
	since := j.SubmittedAt
	if j.NextRunAt.After(since) {
		since = j.NextRunAt
	}
	return effectivePriority(j.Spec.Priority, since, now, cfg)
}

// effectivePriority is priority p aged from since. It never rises with
// since, which is what lets Plan merge runs sorted by submit time.
func effectivePriority(p int, since, now time.Time, cfg Config) int {
	if cfg.AgingInterval <= 0 || p >= cfg.AgingCap {
		return p
	}
	if w := now.Sub(since); w > 0 {
		p += int(w / cfg.AgingInterval)
	}
	return min(p, cfg.AgingCap)
}

// candidate is a runnable job with its priority computed once.
type candidate struct {
	job *fsm.Job
	eff int
}

// sortCandidates orders by effective priority (high first), then FIFO by
// SubmittedAt, then by ID (ULIDs, so submission order within a tick).
func sortCandidates(cs []candidate) {
	slices.SortFunc(cs, func(a, b candidate) int {
		if a.eff != b.eff {
			return b.eff - a.eff
		}
		if c := a.job.SubmittedAt.Compare(b.job.SubmittedAt); c != 0 {
			return c
		}
		return strings.Compare(a.job.ID, b.job.ID)
	})
}
