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

// candidate is a runnable job with its priority computed once. level is
// the first key of Plan's order: eff itself with fair share off, eff
// rounded down to a priority level in use with fair share on (levels).
type candidate struct {
	job   *fsm.Job
	eff   int
	level int
}

// levels are the spec priorities in use in one plan (those of its
// candidates), ascending; nil with fair share off.
//
// With fair share on, Plan orders by level first, not by effective
// priority: a job's level is its effective (aged) priority rounded down
// to the highest priority in use at or below it. Aging still lifts a
// job that waited long enough into the next level in use (so a stream of
// higher-priority work cannot starve it), but never ahead of the jobs of
// its own level in another namespace: within a level the fair-share key
// decides, so a namespace that flooded the queue first does not keep the
// cluster merely because its backlog has aged (issue 39). With fair share
// off the level is the effective priority and the order is as before.
type levels []int

// newLevels is the sorted set of prios (never nil).
func newLevels(prios map[int]struct{}) levels {
	l := make(levels, 0, len(prios))
	for p := range prios {
		l = append(l, p)
	}
	slices.Sort(l)
	return l
}

// of is the level of effective priority eff: the highest level at or
// below it; eff itself with fair share off (and for an eff below every
// level, which a candidate's never is: its spec priority is a level and
// aging only raises it).
func (l levels) of(eff int) int {
	if l == nil {
		return eff
	}
	i, found := slices.BinarySearch(l, eff)
	if found || i == 0 {
		return eff
	}
	return l[i-1]
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
