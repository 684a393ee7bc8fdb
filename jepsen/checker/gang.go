package checker

import (
	"io"
	"sort"
	"strconv"
	"time"
)

// GangRecord is one line of the gang probe: "<kind> <job> <attempt>
// <token> <node> <index> <unix-nanos>", kind being start, tick, end
// (exit 0), fail (a non-zero exit the probe chose) or term (the kill
// signal reached it); index is GANG_INDEX, -1 for a job without a gang.
type GangRecord struct {
	Kind    string
	Job     string
	Attempt int
	Token   uint64
	Node    string
	Index   int
	At      int64
}

// ParseGangRecords reads gang records in file order; torn lines are
// skipped and counted.
func ParseGangRecords(rd io.Reader) (recs []GangRecord, torn int, err error) {
	torn, err = scanRecords(rd, func(f []string) bool {
		if len(f) != 7 {
			return false
		}
		a, t, at, ok := parseCommon(f)
		ix, err := strconv.Atoi(f[5])
		if !ok || err != nil {
			return false
		}
		recs = append(recs, GangRecord{Kind: f[0], Job: f[1], Attempt: a, Token: t, Node: f[4], Index: ix, At: at})
		return true
	})
	return recs, torn, err
}

// GangOptions are the gang checkers' bounds.
type GangOptions struct {
	// Bound is how long a gang task may keep running after a sibling of
	// its placement stopped: the stop's grace period plus the lease bound
	// (lease, safety margin, lost detection).
	Bound time.Duration
	// TickBound is the most a probe runs past its last record without
	// writing another (a SIGKILLed task leaves no end).
	TickBound  time.Duration
	ClockBound time.Duration
}

// gangTask is one execution of one task of one placement, as recorded.
type gangTask struct {
	job          string
	token        uint64
	index        int
	attempt      int
	node         string
	start, last  int64
	end          int64  // end, fail or term record (-1: none)
	endKind      string // "end", "fail", "term" or ""
	startRecords int
}

// stopped reports whether the task stopped other than by succeeding, and
// when: [early, late] (a task with no final record ran until its last
// record, and at most TickBound after it).
func (t *gangTask) stopped(tick time.Duration) (early, late int64, ok bool) {
	switch t.endKind {
	case "fail", "term":
		return t.end, t.end, true
	case "":
		return t.last, t.last + int64(tick), true
	}
	return 0, 0, false
}

// finish is when the task certainly still ran (certain) and the latest it
// may have run (possible).
func (t *gangTask) finish(tick time.Duration) (certain, possible int64) {
	if t.endKind != "" {
		return t.end, t.end
	}
	return t.last, t.last + int64(tick)
}

type placementKey struct {
	job   string
	token uint64
}

// gangTasks groups the records into task executions per placement (one
// fencing token per placement: every task of a gang placement shares it).
func gangTasks(recs []GangRecord, r *Result) (map[placementKey][]*gangTask, []placementKey) {
	type taskKey struct {
		job   string
		token uint64
		index int
	}
	tasks := map[taskKey]*gangTask{}
	byPl := map[placementKey][]*gangTask{}
	var order []placementKey
	for _, rec := range recs {
		k := taskKey{rec.Job, rec.Token, rec.Index}
		t := tasks[k]
		if t == nil {
			t = &gangTask{job: rec.Job, token: rec.Token, index: rec.Index, attempt: rec.Attempt, node: rec.Node, start: -1, end: -1}
			tasks[k] = t
			pk := placementKey{rec.Job, rec.Token}
			if byPl[pk] == nil {
				order = append(order, pk)
			}
			byPl[pk] = append(byPl[pk], t)
		}
		if rec.Attempt != t.attempt || rec.Node != t.node {
			r.errorf("job %s token %d task %d recorded as attempt %d on %s and attempt %d on %s: one task of one placement ran twice",
				rec.Job, rec.Token, rec.Index, t.attempt, t.node, rec.Attempt, rec.Node)
		}
		t.last = max(t.last, rec.At)
		switch rec.Kind {
		case "start":
			t.startRecords++
			if t.startRecords == 2 {
				r.errorf("job %s token %d task %d started twice", rec.Job, rec.Token, rec.Index)
			}
			if t.start < 0 || rec.At < t.start {
				t.start = rec.At
			}
		case "end", "fail", "term":
			if t.endKind == "" || rec.At < t.end {
				t.end, t.endKind = rec.At, rec.Kind
			}
		}
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].job != order[j].job {
			return order[i].job < order[j].job
		}
		return order[i].token < order[j].token
	})
	return byPl, order
}

// GangPartial checks that no gang task runs while a sibling of the same
// placement has been stopped (failed, killed, fenced, lost) for longer than
// opt.Bound. A task certainly ran at its last record; a stopped sibling
// without a final record stopped somewhere in [last, last+TickBound]. A
// task seen running past the latest stop plus the bound fails the check;
// one past the earliest only (inside the uncertainty) is noted.
// overrun_max_ms is the largest time a task was seen running after a
// sibling's earliest stop.
func GangPartial(recs []GangRecord, opt GangOptions) Result {
	r := Result{Name: "gang-partial", Valid: true, Stats: map[string]int{}}
	byPl, order := gangTasks(recs, &r)
	bound, cb := int64(opt.Bound), int64(opt.ClockBound)
	var maxOver int64
	for _, pk := range order {
		ts := byPl[pk]
		if len(ts) == 0 || ts[0].index < 0 {
			continue
		}
		r.Stats["placements"]++
		r.Stats["tasks"] += len(ts)
		stops := 0
		for _, t := range ts {
			early, late, ok := t.stopped(opt.TickBound)
			if !ok {
				continue
			}
			stops++
			for _, s := range ts {
				if s == t || s.start < 0 {
					continue
				}
				// s ran at s.last for certain.
				if over := s.last - early; over > maxOver {
					maxOver = over
				}
				switch {
				case s.last > late+bound+cb:
					r.errorf("job %s placement %d: task %d (%s) ran until %s, %.1fs after task %d (%s) stopped (%s), over the %v bound",
						pk.job, pk.token, s.index, s.node, fmtNs(s.last), float64(s.last-late)/1e9, t.index, t.node, t.stopKind(), opt.Bound)
				case s.last > early+bound:
					r.Stats["possible_overruns"]++
					r.notef("job %s placement %d: task %d ran %.1fs after task %d's last record (it may have stopped up to %v later)",
						pk.job, pk.token, s.index, float64(s.last-early)/1e9, t.index, opt.TickBound)
				}
			}
		}
		if stops > 0 {
			r.Stats["stopped_placements"]++
		}
	}
	r.Stats["overrun_max_ms"] = int(maxOver / 1e6)
	return r
}

func (t *gangTask) stopKind() string {
	if t.endKind == "" {
		return "no final record: killed"
	}
	return t.endKind
}

func fmtNs(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000") }

// GangPlacements checks that two placements of one job are never live at
// once (a later placement's first start is after every task of the earlier
// one finished), that a spread placement's tasks ran on distinct nodes, and
// that each recorded task matches the attempt the cluster recorded (same
// node and fencing token). Jobs without a gang are one-task placements, so
// the same rule says their attempts never overlap.
func GangPlacements(recs []GangRecord, final []FinalJob, opt GangOptions) Result {
	r := Result{Name: "gang-placements", Valid: true, Stats: map[string]int{}}
	byPl, order := gangTasks(recs, &r)
	attempts := map[string]map[int]FinalAttempt{}
	for _, j := range final {
		if len(j.Attempts) == 0 {
			continue // not read (every node failed the final read): nothing to compare
		}
		m := map[int]FinalAttempt{}
		for _, a := range j.Attempts {
			m[a.Attempt] = a
		}
		attempts[j.ID] = m
	}
	type span struct {
		token            uint64
		first            int64
		certain, possibl int64
	}
	perJob := map[string][]span{}
	var jobs []string
	for _, pk := range order {
		ts := byPl[pk]
		sp := span{token: pk.token, first: -1}
		nodes := map[string]int{}
		for _, t := range ts {
			if t.start >= 0 && (sp.first < 0 || t.start < sp.first) {
				sp.first = t.start
			}
			c, p := t.finish(opt.TickBound)
			sp.certain, sp.possibl = max(sp.certain, c), max(sp.possibl, p)
			if t.index >= 0 {
				if prev, ok := nodes[t.node]; ok {
					r.errorf("job %s placement %d: tasks %d and %d both ran on %s (a spread gang)", pk.job, pk.token, prev, t.index, t.node)
				}
				nodes[t.node] = t.index
			}
			if m := attempts[pk.job]; m != nil {
				a, ok := m[t.attempt]
				switch {
				case !ok:
					r.errorf("job %s: attempt %d ran on %s (token %d) but the cluster has no such attempt", pk.job, t.attempt, t.node, pk.token)
				case a.Node != t.node || a.FencingToken != pk.token:
					r.errorf("job %s attempt %d ran on %s with token %d, the cluster says %s token %d", pk.job, t.attempt, t.node, pk.token, a.Node, a.FencingToken)
				case a.Task != nil && a.Task.Index != t.index:
					r.errorf("job %s attempt %d ran as task %d, the cluster says task %d", pk.job, t.attempt, t.index, a.Task.Index)
				}
			}
		}
		if sp.first < 0 {
			continue // no start record (torn): nothing to order
		}
		if perJob[pk.job] == nil {
			jobs = append(jobs, pk.job)
		}
		perJob[pk.job] = append(perJob[pk.job], sp)
		r.Stats["placements"]++
	}
	cb := int64(opt.ClockBound)
	for _, job := range jobs {
		sps := perJob[job]
		if len(sps) > 1 {
			r.Stats["replaced_jobs"]++
		}
		for i := range sps {
			for k := range sps {
				a, b := sps[i], sps[k]
				if a.token >= b.token {
					continue
				}
				// b is the later placement: it must start after a finished.
				switch {
				case b.first < a.certain-cb:
					r.errorf("job %s: placement %d started at %s while placement %d still ran (until %s at least)",
						job, b.token, fmtNs(b.first), a.token, fmtNs(a.certain))
				case b.first < a.possibl:
					r.Stats["possible_overlaps"]++
					r.notef("job %s: placement %d started %.2fs after placement %d's last record (within the tick uncertainty)",
						job, b.token, float64(b.first-a.certain)/1e9, a.token)
				}
			}
		}
	}
	return r
}

// PreemptedOptions say which jobs can fail on their own.
type PreemptedOptions struct {
	// MayFail reports whether the job (by idempotency key) was built to
	// fail; a victim of any other job must end succeeded.
	MayFail func(key string) bool
}

// Preempted checks that preemption never loses a job: every job with a
// preempted attempt is in the final listing and either succeeded after
// another attempt that started later (on the records), is still queued or
// running when the drain ended (noted: liveness, not loss), or failed only
// when it was built to fail. acked maps acknowledged keys to job IDs.
func Preempted(recs []GangRecord, final []FinalJob, acked map[string]string, opt PreemptedOptions) Result {
	r := Result{Name: "preempted", Valid: true, Stats: map[string]int{}}
	started := map[string]map[int]bool{}
	for _, rec := range recs {
		if rec.Kind == "start" {
			if started[rec.Job] == nil {
				started[rec.Job] = map[int]bool{}
			}
			started[rec.Job][rec.Attempt] = true
		}
	}
	byID := map[string]FinalJob{}
	for _, j := range final {
		byID[j.ID] = j
	}
	for key, id := range acked {
		if _, ok := byID[id]; !ok {
			r.errorf("acknowledged job %s (key %s) is not in the final listing", id, key)
		}
	}
	for _, j := range final {
		last := 0
		for _, a := range j.Attempts {
			if a.State == "killed" && a.Reason == "preempted" {
				r.Stats["preempted_attempts"]++
				last = max(last, a.Attempt)
			}
		}
		if last == 0 {
			continue
		}
		r.Stats["victims"]++
		switch j.State {
		case "succeeded":
			won := 0
			for _, a := range j.Attempts {
				if a.State == "succeeded" {
					won = max(won, a.Attempt)
				}
			}
			if won <= last {
				r.errorf("job %s succeeded with attempt %d, not after its preempted attempt %d", j.ID, won, last)
			} else if !started[j.ID][won] {
				r.errorf("job %s succeeded with attempt %d after being preempted, but no record shows that attempt starting", j.ID, won)
			}
			r.Stats["victims_rerun"]++
		case "failed", "cancelled", "skipped":
			if opt.MayFail == nil || !opt.MayFail(j.IdempotencyKey) {
				r.errorf("job %s (key %s) was preempted (attempt %d) and ended %s; it was built to succeed", j.ID, j.IdempotencyKey, last, j.State)
			} else {
				r.Stats["victims_failed_by_design"]++
			}
		default:
			r.Stats["victims_pending"]++
			r.notef("job %s preempted (attempt %d) is still %s after the drain", j.ID, last, j.State)
		}
	}
	return r
}
