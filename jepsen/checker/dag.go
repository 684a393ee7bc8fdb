package checker

import (
	"sort"
	"time"
)

// DAGJob is one workflow job as the final listing shows it, with its
// parents' IDs and its condition.
type DAGJob struct {
	ID        string
	Workflow  string
	Name      string
	State     string
	Parents   []string
	Condition string // success (""), failure, always, one_success
}

// DAG checks invariant 4 on the probes' records: no job started before its
// parents reached the states its condition needs, i.e. before the end
// record of the parent(s) whose finish decided it — every parent's last
// end for success and always, the earliest end of a parent in the needed
// state for failure and one_success. And cascades: no skipped job ever
// started. A parent that never wrote an end (it was skipped or cancelled)
// can only have decided a skip, so a started child with such a decider is
// a violation too. clockBound is the error of comparing records.
func DAG(exec []Record, jobs []DAGJob, clockBound time.Duration) Result {
	r := Result{Name: "dag-order", Valid: true, Stats: map[string]int{}}
	firstStart := map[string]int64{}
	lastEnd := map[string]int64{}
	for _, rec := range exec {
		switch rec.Kind {
		case "start":
			if t, ok := firstStart[rec.Job]; !ok || rec.At < t {
				firstStart[rec.Job] = rec.At
			}
		case "end":
			if rec.At > lastEnd[rec.Job] {
				lastEnd[rec.Job] = rec.At
			}
		}
	}
	byID := make(map[string]*DAGJob, len(jobs))
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	sorted := append([]DAGJob(nil), jobs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for _, j := range sorted {
		r.Stats["jobs"]++
		r.Stats["state_"+j.State]++
		start, started := firstStart[j.ID]
		if j.State == "skipped" {
			if started {
				r.errorf("job %s (%s of workflow %s) is skipped but started at %d", j.ID, j.Name, j.Workflow, start)
			}
			continue
		}
		if !started || len(j.Parents) == 0 {
			continue
		}
		r.Stats["children_started"]++
		// The parents' final states must allow the start at all...
		ok, any := true, j.Condition == "failure" || j.Condition == "one_success"
		met := false
		for _, pid := range j.Parents {
			p := byID[pid]
			if p == nil {
				r.errorf("job %s: parent %s missing from the listing", j.ID, pid)
				ok = false
				break
			}
			switch j.Condition {
			case "failure":
				met = met || p.State == "failed"
			case "one_success":
				met = met || p.State == "succeeded"
			case "always":
				ok = ok && terminal(p.State)
			default:
				ok = ok && p.State == "succeeded"
			}
		}
		if any {
			ok = ok && met
		}
		if !ok {
			r.errorf("job %s (%s, condition %q) started at %d though its parents' states do not allow it", j.ID, j.Name, j.Condition, start)
			continue
		}
		// ...and it must come after the deciding finish: every parent's
		// last end (success, always), the earliest end of a parent in the
		// needed state (failure, one_success). A parent that never ran
		// (skipped, cancelled, failed by a deadline) gives no bound.
		var decided int64 = -1
		for _, pid := range j.Parents {
			p := byID[pid]
			end, ended := lastEnd[pid]
			if !ended || any && !(j.Condition == "failure" && p.State == "failed" || j.Condition == "one_success" && p.State == "succeeded") {
				continue
			}
			switch {
			case decided < 0:
				decided = end
			case any && end < decided:
				decided = end
			case !any && end > decided:
				decided = end
			}
		}
		if decided < 0 {
			continue
		}
		if gap := time.Duration(start - decided); gap < -clockBound {
			r.errorf("job %s (%s, condition %q) started %v before its parents' deciding finish", j.ID, j.Name, j.Condition, (-gap).Round(time.Microsecond))
		} else {
			r.Stats["release_ms_sum"] += int(gap.Milliseconds())
		}
	}
	return r
}

func terminal(state string) bool {
	switch state {
	case "succeeded", "failed", "cancelled", "skipped":
		return true
	}
	return false
}
