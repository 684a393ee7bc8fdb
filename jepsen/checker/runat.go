package checker

import (
	"sort"
	"time"
)

// RunAtOptions are the bounds of the run_at check.
type RunAtOptions struct {
	// Ahead is the largest wall-clock offset ahead of true time any node
	// had (0 without a clock nemesis): a leader that far ahead, or a node
	// that far ahead stamping the submit, releases a job that much early.
	Ahead time.Duration
	// ClockBound is the error of comparing records with the harness's
	// clock (one host clock here).
	ClockBound time.Duration
}

// RunAt checks that no delayed job started before its run_at by more than
// the clock skew the nemesis applied (the stated bound: a scheduler can
// only be as right as its wall clock). runAt maps idempotency keys to the
// run_at the harness asked for (unix ns, host clock). Lateness is
// liveness, not safety: it is reported (max_late_ms), never failed.
func RunAt(exec []Record, final []FinalJob, runAt map[string]int64, opt RunAtOptions) Result {
	r := Result{Name: "run-at", Valid: true, Stats: map[string]int{}}
	first := map[string]int64{}
	for _, rec := range exec {
		if rec.Kind != "start" {
			continue
		}
		if t, ok := first[rec.Job]; !ok || rec.At < t {
			first[rec.Job] = rec.At
		}
	}
	jobs := append([]FinalJob(nil), final...)
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID < jobs[j].ID })
	var late []int64
	for _, j := range jobs {
		at, ok := runAt[j.IdempotencyKey]
		if !ok {
			continue
		}
		r.Stats["delayed"]++
		start, ok := first[j.ID]
		if !ok {
			r.Stats["never_started"]++ // the execution checker judges these
			continue
		}
		early := time.Duration(at - start)
		switch {
		case early > opt.Ahead+opt.ClockBound:
			r.errorf("job %s (key %s) started %v before its run_at; the largest clock offset ahead was %v",
				j.ID, j.IdempotencyKey, early.Round(time.Millisecond), opt.Ahead)
		case early > opt.ClockBound:
			r.Stats["early_within_skew"]++
			r.Stats["max_early_ms"] = max(r.Stats["max_early_ms"], int(early.Milliseconds()))
		default:
			late = append(late, -int64(early))
		}
	}
	if len(late) > 0 {
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		r.Stats["median_late_ms"] = int(time.Duration(late[len(late)/2]).Milliseconds())
		r.Stats["max_late_ms"] = int(time.Duration(late[len(late)-1]).Milliseconds())
	}
	if r.Stats["early_within_skew"] > 0 {
		r.notef("%d delayed jobs started before run_at, at most %d ms early, within the clock skew applied (%v ahead)",
			r.Stats["early_within_skew"], r.Stats["max_early_ms"], opt.Ahead)
	}
	return r
}
