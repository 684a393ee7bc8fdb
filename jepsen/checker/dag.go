package checker

import (
	"sort"
	"strconv"
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
	// After is set for a job submitted with after (outside a workflow):
	// each parent's requirement (ok, any, failed, cancelled).
	After map[string]string
	// Array is set for an array job: its bound and its made tasks.
	Array *DAGArray
}

// DAGArray is an array job's size, %PARALLEL bound (0: none) and tasks.
type DAGArray struct {
	Size, Parallel int
	Tasks          []DAGTask
}

// DAGTask is one made task of an array.
type DAGTask struct {
	ID    string
	Index int
	State string
}

// afterMet says whether a parent that ended in state meets requirement on
// (met), or can no longer (done and not met).
func afterMet(on, state string) (met, done bool) {
	if !terminal(state) {
		return false, false
	}
	switch on {
	case "ok":
		return state == "succeeded", true
	case "failed":
		return state == "failed", true
	case "cancelled":
		return state == "cancelled", true
	}
	return true, true // any
}

// checkAfter checks a job with After: it started only if every parent
// met its requirement and after each parent's last end; it is cancelled
// (and never started) exactly when a requirement was broken, and decided
// once every parent ended.
func checkAfter(r *Result, j DAGJob, byID map[string]*DAGJob, firstStart, lastEnd map[string]int64, clockBound time.Duration) {
	r.Stats["after_jobs"]++
	start, started := firstStart[j.ID]
	allDone, broken := true, ""
	for _, pid := range j.Parents {
		p := byID[pid]
		if p == nil {
			r.errorf("job %s: parent %s missing from the listing", j.ID, pid)
			return
		}
		met, done := afterMet(j.After[pid], p.State)
		allDone = allDone && done
		if done && !met && broken == "" {
			broken = pid + ":" + j.After[pid] + " (" + p.State + ")"
		}
		if end, ended := lastEnd[pid]; started && ended {
			if gap := time.Duration(start - end); gap < -clockBound {
				r.errorf("job %s (after %s:%s) started %v before its parent's finish", j.ID, pid, j.After[pid], (-gap).Round(time.Microsecond))
			}
		}
	}
	switch {
	case started && broken != "":
		r.errorf("job %s started at %d though its requirement %s was not met", j.ID, start, broken)
	case j.State == "cancelled" && started:
		r.errorf("job %s is cancelled by its dependencies but started at %d", j.ID, start)
	case allDone && broken != "" && j.State != "cancelled":
		r.errorf("job %s is %s though its requirement %s can no longer be met (want cancelled)", j.ID, j.State, broken)
	case allDone && broken == "" && (j.State == "cancelled" || j.State == "waiting"):
		r.errorf("job %s is %s though every requirement was met", j.ID, j.State)
	case started:
		r.Stats["after_started"]++
	case j.State == "cancelled":
		r.Stats["after_cancelled"]++
	}
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
		// An array starts with its first task and ends with its last.
		if a := jobs[i].Array; a != nil {
			id := jobs[i].ID
			for _, t := range a.Tasks {
				if st, ok := firstStart[t.ID]; ok {
					if cur, ok := firstStart[id]; !ok || st < cur {
						firstStart[id] = st
					}
				}
				lastEnd[id] = max(lastEnd[id], lastEnd[t.ID])
			}
			if lastEnd[id] == 0 {
				delete(lastEnd, id)
			}
		}
	}
	sorted := append([]DAGJob(nil), jobs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for _, j := range sorted {
		r.Stats["jobs"]++
		r.Stats["state_"+j.State]++
		if j.After != nil {
			checkAfter(&r, j, byID, firstStart, lastEnd, clockBound)
			continue
		}
		if j.Array != nil {
			checkArray(&r, j, exec, lastEnd, clockBound)
		}
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

// checkArray checks an array job against its tasks and their records:
// its tasks are distinct indexes of the array; it succeeded only when every
// index did, failed only when one did; a task that succeeded ran; and no
// more than %PARALLEL of its tasks' executions overlapped (executions with
// a start and an end record; an end and a start within clockBound of each
// other do not overlap).
func checkArray(r *Result, j DAGJob, exec []Record, lastEnd map[string]int64, clockBound time.Duration) {
	a := j.Array
	r.Stats["arrays"]++
	r.Stats["array_tasks"] += len(a.Tasks)
	seen := map[int]bool{}
	mine := map[string]bool{}
	states := map[string]int{}
	for _, t := range a.Tasks {
		mine[t.ID] = true
		states[t.State]++
		switch {
		case t.Index < 0 || t.Index >= a.Size:
			r.errorf("array %s: task %s has index %d outside 0-%d", j.ID, t.ID, t.Index, a.Size-1)
		case seen[t.Index]:
			r.errorf("array %s: index %d made twice", j.ID, t.Index)
		}
		seen[t.Index] = true
		if _, ended := lastEnd[t.ID]; t.State == "succeeded" && !ended {
			r.errorf("array %s: task %s succeeded without an end record", j.ID, t.ID)
		}
	}
	switch {
	case j.State == "succeeded" && (states["succeeded"] != a.Size || len(a.Tasks) != a.Size):
		r.errorf("array %s succeeded with %d of %d tasks succeeded", j.ID, states["succeeded"], a.Size)
	case j.State == "failed" && states["failed"] == 0:
		r.errorf("array %s failed though no task failed (%v)", j.ID, states)
	case terminal(j.State) && j.State != "failed" && states["failed"] > 0:
		r.errorf("array %s is %s though %d tasks failed", j.ID, j.State, states["failed"])
	}
	type edge struct {
		at int64
		d  int
	}
	starts := map[string]int64{}
	var edges []edge
	for _, rec := range exec {
		if !mine[rec.Job] {
			continue
		}
		key := rec.Job + "/" + strconv.Itoa(rec.Attempt) + "/" + strconv.FormatUint(rec.Token, 10)
		switch rec.Kind {
		case "start":
			starts[key] = rec.At
		case "end":
			if st, ok := starts[key]; ok {
				edges = append(edges, edge{st, 1}, edge{rec.At - int64(clockBound), -1})
			}
		}
	}
	sort.Slice(edges, func(i, k int) bool {
		if edges[i].at != edges[k].at {
			return edges[i].at < edges[k].at
		}
		return edges[i].d < edges[k].d
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	r.Stats["array_max_parallel"] = max(r.Stats["array_max_parallel"], most)
	if a.Parallel > 0 && most > a.Parallel {
		r.errorf("array %s: %d tasks ran at once (bound %d)", j.ID, most, a.Parallel)
	}
}
