package checker

import (
	"iter"
	"sort"
	"time"
)

// ExecOptions tunes the execution checker.
type ExecOptions struct {
	// ClockBound is the error allowed when comparing records of different
	// nodes. Every namespace shares one host clock here, so it only covers
	// the gap between a probe's date call and its real start or end.
	ClockBound time.Duration
	// EndOfTest closes intervals of executions that never wrote "end" and
	// never ticked (0 = use TickBound from their start instead).
	EndOfTest int64
	// TickBound is the most a probe can run past its last record (start or
	// tick) without writing another: an execution that never wrote "end"
	// (killed, fenced) ended somewhere in [last record, last record +
	// TickBound]. 0 = unknown: such executions run until EndOfTest.
	TickBound time.Duration
}

// execKey names one execution: a job's attempt, by its fencing token.
type execKey struct {
	job   string
	token uint64
}

// executions are probe records grouped by execution, E each (an interval
// or what holds one).
type executions[E any] struct {
	m     map[execKey]*E
	order []execKey // as first seen
}

// of is execution k, made by start at its first record.
func (x *executions[E]) of(k execKey, start func() *E) *E {
	e := x.m[k]
	if e == nil {
		if x.m == nil {
			x.m = map[execKey]*E{}
		}
		e = start()
		x.m[k] = e
		x.order = append(x.order, k)
	}
	return e
}

// all is every execution, in the order first seen.
func (x *executions[E]) all() iter.Seq2[execKey, *E] {
	return func(yield func(execKey, *E) bool) {
		for _, k := range x.order {
			if !yield(k, x.m[k]) {
				return
			}
		}
	}
}

// newInterval is an execution's interval before its first record.
func newInterval(attempt int, token uint64, node string) interval {
	return interval{attempt: attempt, token: token, node: node, start: -1, end: -1}
}

type interval struct {
	attempt    int
	token      uint64
	node       string
	start, end int64
	last       int64 // latest start or tick
	open       bool
}

// record applies one probe record of the execution (kind start, tick or
// end, at its time); a second start is a reused token.
func (iv *interval) record(r *Result, kind, job, node string, at int64) {
	switch kind {
	case "start":
		if iv.start >= 0 {
			r.errorf("token reused: job %s token %d started twice (nodes %s, %s)", job, iv.token, iv.node, node)
		}
		iv.start = at
		iv.last = max(iv.last, at)
	case "tick":
		iv.last = max(iv.last, at)
	case "end":
		iv.end = at
	}
}

// finish closes an execution after the last record: one with no end
// (killed, fenced) is open and ran until endOfTest, or tickBound past its
// last record when there is one, and counts as incomplete. It is false
// for an end without a start (its start line was torn): no execution.
func (iv *interval) finish(r *Result, endOfTest int64, tickBound time.Duration) bool {
	if iv.start < 0 {
		return false
	}
	if iv.end < 0 {
		iv.end, iv.open = endOfTest, true
		if tickBound > 0 {
			iv.end = iv.last + int64(tickBound)
		}
		r.Stats["incomplete"]++
	}
	return true
}

// overlap is how long iv and b (which started no earlier) ran together.
// An open iv is certain only up to its last record: possible says an
// overlap beyond clockBound falls wholly within the tick bound after it,
// where the records cannot tell.
func (iv *interval) overlap(b *interval, tickBound, clockBound time.Duration) (ov time.Duration, possible bool) {
	ov = time.Duration(min(iv.end, b.end) - b.start)
	if iv.open && tickBound > 0 && ov > clockBound {
		sure := time.Duration(min(iv.last, b.end) - b.start)
		if sure <= clockBound {
			return ov, true
		}
		ov = sure
	}
	return ov, false
}

// Execution checks invariant 2 from the probe records: executions of one job
// never overlap (within ClockBound), every succeeded job has an execution
// that matches its succeeded attempt, and a fencing sink replayed in the
// sink file's order (accept a token iff it is >= the highest seen for the
// job) accepts at most one completion per job, from the attempt the cluster
// recorded as succeeded.
//
// Overlap is timing-dependent (it holds only while pauses stay below the
// lease); it fails the check, and the report says so. The records resolve
// it to one tick: a killed execution (no "end") is known to have run until
// its last record, and may have run until TickBound after it (SIGKILL
// leaves no trace; a loaded machine stretches the tick). A later execution
// that started before that last record overlaps for certain and fails the
// check; one that started inside the uncertainty window is counted as a
// possible overlap and noted, not failed.
func Execution(exec []Record, sink []Record, final []FinalJob, opt ExecOptions) Result {
	r := Result{Name: "execution", Valid: true, Stats: map[string]int{}}
	var ivs executions[interval]
	for _, rec := range exec {
		iv := ivs.of(execKey{rec.Job, rec.Token}, func() *interval {
			iv := newInterval(rec.Attempt, rec.Token, rec.Node)
			return &iv
		})
		iv.record(&r, rec.Kind, rec.Job, rec.Node, rec.At)
	}
	perJob := map[string][]*interval{}
	for k, iv := range ivs.all() {
		if !iv.finish(&r, opt.EndOfTest, opt.TickBound) {
			continue
		}
		perJob[k.job] = append(perJob[k.job], iv)
	}
	r.Stats["executions"] = len(ivs.order)
	r.Stats["jobs_executed"] = len(perJob)
	maxOverlap := time.Duration(0)
	for job, list := range perJob {
		if len(list) > 1 {
			r.Stats["re_executed_jobs"]++
		}
		sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
		for i := 0; i < len(list); i++ {
			for j := i + 1; j < len(list); j++ {
				a, b := list[i], list[j]
				ov, possible := a.overlap(b, opt.TickBound, opt.ClockBound)
				if possible {
					r.Stats["possible_overlaps"]++
					r.notef("possible overlap: job %s attempt %d (token %d, %s) was last seen %v before attempt %d (token %d, %s) started, then killed with no record: within the tick bound %v, the records cannot tell",
						job, a.attempt, a.token, a.node, time.Duration(b.start-a.last).Round(time.Millisecond), b.attempt, b.token, b.node, opt.TickBound)
					continue
				}
				if ov > opt.ClockBound {
					r.Stats["overlaps"]++
					maxOverlap = max(maxOverlap, ov)
					r.errorf("overlap: job %s attempt %d (token %d, %s%s) and attempt %d (token %d, %s%s) ran together for %v",
						job, a.attempt, a.token, a.node, openMark(a), b.attempt, b.token, b.node, openMark(b), ov)
				}
			}
		}
	}
	r.Stats["max_overlap_ms"] = int(maxOverlap / time.Millisecond)

	succeeded := map[string]uint64{} // job -> token of its succeeded attempt
	attemptState := map[execKey]string{}
	for _, j := range final {
		for _, a := range j.Attempts {
			attemptState[execKey{j.ID, a.FencingToken}] = a.State
			if a.State == "succeeded" {
				succeeded[j.ID] = a.FencingToken
			}
		}
		if j.State == "succeeded" {
			if len(perJob[j.ID]) == 0 {
				r.errorf("phantom success: job %s succeeded with no execution record", j.ID)
				continue
			}
			tok, ok := succeeded[j.ID]
			if ok && ivs.m[execKey{j.ID, tok}] == nil {
				r.errorf("phantom success: job %s succeeded with token %d but no execution carried it", j.ID, tok)
			}
		}
	}

	// The fencing sink, replayed in append order.
	highest := map[string]uint64{}
	accepted := map[string][]Record{}
	for _, rec := range sink {
		if rec.Kind != "effect" {
			continue
		}
		if h, ok := highest[rec.Job]; ok && rec.Token < h {
			r.Stats["stale_rejected"]++
			continue
		}
		highest[rec.Job] = rec.Token
		accepted[rec.Job] = append(accepted[rec.Job], rec)
		r.Stats["effects_accepted"]++
	}
	for job, recs := range accepted {
		tok, ok := succeeded[job]
		for i, rec := range recs {
			if ok && rec.Token > tok {
				r.errorf("superseded token accepted: job %s effect with token %d after succeeded token %d", job, rec.Token, tok)
			}
			if i == 0 {
				continue
			}
			// A second accepted completion is legitimate only when the
			// cluster recorded the earlier attempt as lost (its node was
			// declared dead after the lease): at-least-once, not a bug.
			prev := recs[i-1]
			st := attemptState[execKey{job, prev.Token}]
			if st == "lost" {
				r.Stats["completions_after_lost"]++
				r.notef("job %s completed with token %d, then again with %d (earlier attempt recorded lost)", job, prev.Token, rec.Token)
				continue
			}
			r.Stats["double_completions"]++
			r.errorf("two accepted completions: job %s tokens %d then %d (earlier attempt state %q)", job, prev.Token, rec.Token, st)
		}
	}
	for _, k := range []string{"overlaps", "possible_overlaps", "stale_rejected", "double_completions", "incomplete", "re_executed_jobs"} {
		r.Stats[k] += 0
	}
	return r
}

func openMark(iv *interval) string {
	if iv.open {
		return ", never ended"
	}
	return ""
}
