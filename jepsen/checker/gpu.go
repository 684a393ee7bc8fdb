package checker

import (
	"bufio"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// GPURecord is one line of the GPU probe: "<kind> <job> <attempt> <token>
// <node> <uuids> <unix-nanos>", kind being start, tick or end, and uuids
// the job's FOREMAN_GPU_UUIDS ("-" when empty).
type GPURecord struct {
	Kind    string
	Job     string
	Attempt int
	Token   uint64
	Node    string
	UUIDs   []string
	At      int64
}

// ParseGPURecords reads GPU records in file order; torn lines are skipped
// and counted.
func ParseGPURecords(rd io.Reader) (recs []GPURecord, torn int, err error) {
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 7 {
			if len(f) > 0 {
				torn++
			}
			continue
		}
		a, err1 := strconv.Atoi(f[2])
		t, err2 := strconv.ParseUint(f[3], 10, 64)
		at, err3 := strconv.ParseInt(f[6], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			torn++
			continue
		}
		var uuids []string
		if f[5] != "-" {
			uuids = strings.Split(f[5], ",")
		}
		recs = append(recs, GPURecord{Kind: f[0], Job: f[1], Attempt: a, Token: t, Node: f[4], UUIDs: uuids, At: at})
	}
	return recs, torn, sc.Err()
}

// ReadGPURecordFiles parses every file matching glob, concatenated.
func ReadGPURecordFiles(glob string) ([]GPURecord, int, error) {
	return readFiles(glob, ParseGPURecords)
}

// GPUOptions are the GPU checker's bounds and what it compares against.
type GPUOptions struct {
	// ClockBound, EndOfTest and TickBound mean what they mean for the
	// execution checker (ExecOptions), and are applied the same way.
	ClockBound time.Duration
	EndOfTest  int64
	TickBound  time.Duration
	// Requested maps a job ID to the GPUs it asked for (absent: unknown,
	// not checked).
	Requested map[string]int
	// NodeGPUs lists a node's GPU UUIDs (nil: not checked): an execution
	// may only hold devices of the node it ran on.
	NodeGPUs func(node string) []string
}

// gpuExec is one execution (one attempt's run) as recorded.
type gpuExec struct {
	interval
	job   string
	uuids []string
}

// GPU checks the exact-assignment guarantee from the GPU probe's records
// and the final view:
//
//   - exclusive: per GPU UUID, the executions of distinct attempts (job and
//     fencing token) never overlap. The overlap rule is the execution
//     checker's, unchanged: an execution with no end (killed, fenced by its
//     own lease) certainly ran until its last record and may have run
//     TickBound past it; a later execution on the same device that started
//     before that last record overlaps for certain and fails the check, one
//     that started inside the uncertainty window is a noted possible
//     overlap.
//   - recorded: the UUIDs an execution saw in FOREMAN_GPU_UUIDS are, as a
//     set, the gpus the cluster recorded for its attempt (the attempt with
//     the same fencing token), as many as the job asked for, all of the
//     node the execution ran on, and the same in every record of the
//     execution.
func GPU(recs []GPURecord, final []FinalJob, opt GPUOptions) Result {
	r := Result{Name: "gpu", Valid: true, Stats: map[string]int{}}
	type key struct {
		job   string
		token uint64
	}
	execs := map[key]*gpuExec{}
	var order []key
	for _, rec := range recs {
		k := key{rec.Job, rec.Token}
		e := execs[k]
		if e == nil {
			e = &gpuExec{interval: interval{attempt: rec.Attempt, token: rec.Token, node: rec.Node, start: -1, end: -1},
				job: rec.Job, uuids: rec.UUIDs}
			execs[k] = e
			order = append(order, k)
		}
		if !slices.Equal(rec.UUIDs, e.uuids) || rec.Node != e.node {
			r.errorf("job %s token %d recorded with GPUs %v on %s and %v on %s: one execution, two views",
				rec.Job, rec.Token, e.uuids, e.node, rec.UUIDs, rec.Node)
		}
		switch rec.Kind {
		case "start":
			if e.start >= 0 {
				r.errorf("token reused: job %s token %d started twice (nodes %s, %s)", rec.Job, rec.Token, e.node, rec.Node)
			}
			e.start = rec.At
			e.last = max(e.last, rec.At)
		case "tick":
			e.last = max(e.last, rec.At)
		case "end":
			e.end = rec.At
		}
	}

	attempts := map[key]FinalAttempt{}
	read := map[string]bool{} // jobs whose attempts the final view has
	for _, j := range final {
		if len(j.Attempts) > 0 {
			read[j.ID] = true
		}
		for _, a := range j.Attempts {
			attempts[key{j.ID, a.FencingToken}] = a
		}
	}

	// Exclusive: the execution checker's overlap rule, per device.
	perGPU := map[string][]*gpuExec{}
	for _, k := range order {
		e := execs[k]
		if e.start < 0 {
			continue // an end without a start: its start line was torn
		}
		if e.end < 0 {
			e.end, e.open = opt.EndOfTest, true
			if opt.TickBound > 0 {
				e.end = e.last + int64(opt.TickBound)
			}
			r.Stats["incomplete"]++
		}
		for _, u := range e.uuids {
			perGPU[u] = append(perGPU[u], e)
		}
	}
	r.Stats["executions"] = len(order)
	r.Stats["gpus_used"] = len(perGPU)
	maxOverlap := time.Duration(0)
	for _, u := range sortedKeys(perGPU) {
		list := perGPU[u]
		sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
		r.Stats["max_executions_per_gpu"] = max(r.Stats["max_executions_per_gpu"], len(list))
		// Handovers after a lost attempt: the case fencing exists for (the
		// leader freed the device without hearing from the execution).
		for i := 0; i+1 < len(list); i++ {
			if a := list[i]; attempts[key{a.job, a.token}].State == "lost" {
				gap := list[i+1].start - a.last // no end: from its last record
				if !a.open {
					gap = list[i+1].start - a.end
				}
				if r.Stats["handovers_after_lost"] == 0 || int(gap/int64(time.Millisecond)) < r.Stats["min_gap_after_lost_ms"] {
					r.Stats["min_gap_after_lost_ms"] = int(gap / int64(time.Millisecond))
				}
				r.Stats["handovers_after_lost"]++
			}
		}
		for i := 0; i < len(list); i++ {
			for j := i + 1; j < len(list); j++ {
				a, b := list[i], list[j]
				ov := time.Duration(min(a.end, b.end) - b.start)
				if a.open && opt.TickBound > 0 && ov > opt.ClockBound {
					// Certain only up to a's last record.
					sure := time.Duration(min(a.last, b.end) - b.start)
					if sure <= opt.ClockBound {
						r.Stats["possible_overlaps"]++
						r.notef("possible overlap on %s: job %s attempt %d (token %d, %s) was last seen %v before job %s attempt %d (token %d, %s) started, then killed with no record: within the tick bound %v, the records cannot tell",
							u, a.job, a.attempt, a.token, a.node, time.Duration(b.start-a.last).Round(time.Millisecond), b.job, b.attempt, b.token, b.node, opt.TickBound)
						continue
					}
					ov = sure
				}
				if ov > opt.ClockBound {
					r.Stats["overlaps"]++
					maxOverlap = max(maxOverlap, ov)
					r.errorf("GPU %s held twice: job %s attempt %d (token %d, %s%s) and job %s attempt %d (token %d, %s%s) ran on it together for %v",
						u, a.job, a.attempt, a.token, a.node, openMark(&a.interval), b.job, b.attempt, b.token, b.node, openMark(&b.interval), ov)
				}
			}
		}
	}
	r.Stats["max_overlap_ms"] = int(maxOverlap / time.Millisecond)

	// Recorded: what the execution saw is what the state says.
	for _, k := range order {
		e := execs[k]
		seen := slices.Sorted(slices.Values(e.uuids))
		if n, ok := opt.Requested[k.job]; ok && len(seen) != n {
			r.Stats["wrong_count"]++
			r.errorf("job %s token %d asked for %d GPUs and ran with %d: %v", k.job, k.token, n, len(seen), seen)
		}
		if opt.NodeGPUs != nil {
			own := opt.NodeGPUs(e.node)
			for _, u := range seen {
				if !slices.Contains(own, u) {
					r.Stats["foreign_gpus"]++
					r.errorf("job %s token %d ran on %s with GPU %s, which is not one of %s's", k.job, k.token, e.node, u, e.node)
				}
			}
		}
		if !read[k.job] {
			r.Stats["unverified"]++
			r.notef("job %s: the final view has no attempts for it (its read failed); execution token %d not compared", k.job, k.token)
			continue
		}
		a, ok := attempts[k]
		if !ok {
			r.Stats["unrecorded"]++
			r.errorf("job %s ran with token %d on %s, but the cluster has no attempt with that token", k.job, k.token, e.node)
			continue
		}
		var want []string
		for _, g := range a.GPUs {
			want = append(want, g.UUID)
		}
		slices.Sort(want)
		if !slices.Equal(seen, want) {
			r.Stats["mismatched"]++
			r.errorf("job %s attempt %d (token %d, %s) ran with FOREMAN_GPU_UUIDS %v but its attempt records %v", k.job, a.Attempt, k.token, e.node, seen, want)
			continue
		}
		if a.Node != "" && a.Node != e.node {
			r.Stats["mismatched"]++
			r.errorf("job %s attempt %d (token %d) ran on %s but its attempt records node %s", k.job, a.Attempt, k.token, e.node, a.Node)
			continue
		}
		r.Stats["matched"]++
	}
	for _, k := range []string{"overlaps", "possible_overlaps", "incomplete", "matched", "mismatched", "unrecorded", "unverified", "wrong_count", "foreign_gpus", "handovers_after_lost"} {
		r.Stats[k] += 0
	}
	return r
}
