package checker

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// GPURecord is one line of the GPU probe: "<kind> <job> <attempt> <token>
// <node> <uuids> <share> <unix-nanos>", kind being start, tick or end,
// uuids the job's FOREMAN_GPU_UUIDS ("-" when empty) and share its
// FOREMAN_GPU_MEMORY_MIB ("-" for a job holding whole GPUs). Lines
// without the share field (the format before VRAM shares) read as whole.
type GPURecord struct {
	Kind     string
	Job      string
	Attempt  int
	Token    uint64
	Node     string
	UUIDs    []string
	ShareMiB int64 // 0: whole GPUs
	At       int64
}

// ParseGPURecords reads GPU records in file order; torn lines are skipped
// and counted.
func ParseGPURecords(rd io.Reader) (recs []GPURecord, torn int, err error) {
	torn, err = scanRecords(rd, func(f []string) bool {
		if len(f) == 7 {
			f = append(f[:6], "-", f[6])
		}
		if len(f) != 8 {
			return false
		}
		a, t, at, ok := parseCommon(f)
		var share int64
		var err error
		if f[6] != "-" {
			share, err = strconv.ParseInt(f[6], 10, 64)
		}
		if !ok || err != nil || share < 0 {
			return false
		}
		var uuids []string
		if f[5] != "-" {
			uuids = strings.Split(f[5], ",")
		}
		recs = append(recs, GPURecord{Kind: f[0], Job: f[1], Attempt: a, Token: t, Node: f[4], UUIDs: uuids, ShareMiB: share, At: at})
		return true
	})
	return recs, torn, err
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
	// RequestedShare maps a job ID to the VRAM share it asked for in MiB
	// (absent: whole GPUs, or unknown).
	RequestedShare map[string]int64
	// DeviceMiB is a device's memory (0: unknown): the shares of the
	// executions live on it at once must add up to no more.
	DeviceMiB func(uuid string) int64
}

// gpuExec is one execution (one attempt's run) as recorded.
type gpuExec struct {
	interval
	job   string
	uuids []string
	share int64 // MiB; 0: whole devices
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
	var execs executions[gpuExec]
	for _, rec := range recs {
		e := execs.of(execKey{rec.Job, rec.Token}, func() *gpuExec {
			return &gpuExec{interval: newInterval(rec.Attempt, rec.Token, rec.Node), job: rec.Job, uuids: rec.UUIDs, share: rec.ShareMiB}
		})
		if !slices.Equal(rec.UUIDs, e.uuids) || rec.Node != e.node || rec.ShareMiB != e.share {
			r.errorf("job %s token %d recorded with GPUs %v on %s and %v on %s: one execution, two views",
				rec.Job, rec.Token, e.uuids, e.node, rec.UUIDs, rec.Node)
		}
		e.record(&r, rec.Kind, rec.Job, rec.Node, rec.At)
	}

	attempts := map[execKey]FinalAttempt{}
	read := map[string]bool{} // jobs whose attempts the final view has
	for _, j := range final {
		if len(j.Attempts) > 0 {
			read[j.ID] = true
		}
		for _, a := range j.Attempts {
			attempts[execKey{j.ID, a.FencingToken}] = a
		}
	}

	// Exclusive: the execution checker's overlap rule, per device.
	perGPU := map[string][]*gpuExec{}
	for _, e := range execs.all() {
		if !e.finish(&r, opt.EndOfTest, opt.TickBound) {
			continue
		}
		for _, u := range e.uuids {
			perGPU[u] = append(perGPU[u], e)
		}
	}
	r.Stats["executions"] = len(execs.order)
	r.Stats["gpus_used"] = len(perGPU)
	maxOverlap := time.Duration(0)
	for _, u := range slices.Sorted(maps.Keys(perGPU)) {
		list := perGPU[u]
		sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
		r.Stats["max_executions_per_gpu"] = max(r.Stats["max_executions_per_gpu"], len(list))
		// Handovers after a lost attempt: the case fencing exists for (the
		// leader freed the device without hearing from the execution).
		for i := 0; i+1 < len(list); i++ {
			if a := list[i]; attempts[execKey{a.job, a.token}].State == "lost" {
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
				if a.share > 0 && b.share > 0 {
					continue // shares may run together: their sum is checked below
				}
				ov, possible := a.overlap(&b.interval, opt.TickBound, opt.ClockBound)
				if possible {
					r.Stats["possible_overlaps"]++
					r.notef("possible overlap on %s: job %s attempt %d (token %d, %s) was last seen %v before job %s attempt %d (token %d, %s) started, then killed with no record: within the tick bound %v, the records cannot tell",
						u, a.job, a.attempt, a.token, a.node, time.Duration(b.start-a.last).Round(time.Millisecond), b.job, b.attempt, b.token, b.node, opt.TickBound)
					continue
				}
				if ov > opt.ClockBound {
					r.Stats["overlaps"]++
					maxOverlap = max(maxOverlap, ov)
					how := "held twice"
					if a.share > 0 || b.share > 0 {
						how = "held whole and by a share at once"
						r.Stats["whole_share_overlaps"]++
					}
					r.errorf("GPU %s %s: job %s attempt %d (token %d, %s%s%s) and job %s attempt %d (token %d, %s%s%s) ran on it together for %v",
						u, how, a.job, a.attempt, a.token, a.node, shareMark(a), openMark(&a.interval), b.job, b.attempt, b.token, b.node, shareMark(b), openMark(&b.interval), ov)
				}
			}
		}
		checkShares(&r, u, list, opt)
	}
	r.Stats["max_overlap_ms"] = int(maxOverlap / time.Millisecond)

	// Recorded: what the execution saw is what the state says.
	for k, e := range execs.all() {
		seen := slices.Sorted(slices.Values(e.uuids))
		if e.share > 0 {
			r.Stats["share_executions"]++
		}
		if want, ok := opt.RequestedShare[k.job]; ok && (e.share != want || len(seen) != 1) {
			r.Stats["wrong_count"]++
			r.errorf("job %s token %d asked for a %d MiB share of one GPU and ran with %d MiB on %v", k.job, k.token, want, e.share, seen)
		}
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
		var wantShare int64
		if sh := a.GPUShare; sh != nil {
			want, wantShare = append(want, sh.GPU.UUID), sh.MemoryMiB
		}
		slices.Sort(want)
		if e.share != wantShare {
			r.Stats["mismatched"]++
			r.errorf("job %s attempt %d (token %d, %s) ran with FOREMAN_GPU_MEMORY_MIB %d but its attempt records a share of %d MiB", k.job, a.Attempt, k.token, e.node, e.share, wantShare)
			continue
		}
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
	for _, k := range []string{"overlaps", "possible_overlaps", "incomplete", "matched", "mismatched", "unrecorded", "unverified", "wrong_count", "foreign_gpus", "handovers_after_lost",
		"share_executions", "whole_share_overlaps", "overcommits", "possible_overcommits", "max_shares_per_gpu", "max_share_pct"} {
		r.Stats[k] += 0
	}
	return r
}

func shareMark(e *gpuExec) string {
	if e.share > 0 {
		return ", share " + strconv.FormatInt(e.share, 10) + " MiB"
	}
	return ""
}

// checkShares checks, for one device, that the shares of the executions
// live on it at once never add up past its memory. An execution is
// certainly live from its start (plus the clock bound) to its end, or to
// its last record when it has none; the tick bound past that last record
// is uncertain: a sum over the memory only with those tails is a noted
// possible over-commit, as for overlaps.
func checkShares(r *Result, u string, list []*gpuExec, opt GPUOptions) {
	var shares []*gpuExec
	for _, e := range list {
		if e.share > 0 {
			shares = append(shares, e)
		}
	}
	if len(shares) == 0 {
		return
	}
	capMiB := int64(0)
	if opt.DeviceMiB != nil {
		capMiB = opt.DeviceMiB(u)
	}
	certainEnd := func(e *gpuExec) int64 {
		if e.open {
			return e.last
		}
		return e.end
	}
	peak := func(end func(*gpuExec) int64) (int64, int, []*gpuExec) {
		type point struct {
			at    int64
			delta int64
			e     *gpuExec
		}
		var pts []point
		for _, e := range shares {
			from, to := e.start+int64(opt.ClockBound), end(e)
			if to > from {
				pts = append(pts, point{from, e.share, e}, point{to, -e.share, e})
			}
		}
		// Ends before starts at one instant: a handover is not an overlap.
		sort.Slice(pts, func(i, j int) bool {
			if pts[i].at != pts[j].at {
				return pts[i].at < pts[j].at
			}
			return pts[i].delta < pts[j].delta
		})
		var sum, best int64
		n, bestN := 0, 0
		live := map[*gpuExec]bool{}
		var at []*gpuExec
		for _, p := range pts {
			sum += p.delta
			if p.delta > 0 {
				n++
				live[p.e] = true
			} else {
				n--
				delete(live, p.e)
			}
			if sum > best {
				best, bestN = sum, n
				at = at[:0]
				for _, e := range shares {
					if live[e] {
						at = append(at, e)
					}
				}
			}
		}
		return best, bestN, at
	}
	sum, n, at := peak(certainEnd)
	r.Stats["max_shares_per_gpu"] = max(r.Stats["max_shares_per_gpu"], n)
	if capMiB > 0 {
		r.Stats["max_share_pct"] = max(r.Stats["max_share_pct"], int(sum*100/capMiB))
	}
	if capMiB <= 0 {
		return
	}
	name := func(list []*gpuExec) string {
		var parts []string
		for _, e := range list {
			parts = append(parts, fmt.Sprintf("%s/%d (token %d, %d MiB%s)", e.job, e.attempt, e.token, e.share, openMark(&e.interval)))
		}
		return strings.Join(parts, ", ")
	}
	if sum > capMiB {
		r.Stats["overcommits"]++
		r.errorf("GPU %s over-committed: shares of %d MiB live at once on a %d MiB device: %s", u, sum, capMiB, name(at))
		return
	}
	if opt.TickBound > 0 {
		if psum, _, pat := peak(func(e *gpuExec) int64 { return e.end }); psum > capMiB {
			r.Stats["possible_overcommits"]++
			r.notef("possible over-commit of GPU %s: %d MiB of shares only counting executions killed with no record within the tick bound %v: %s", u, psum, opt.TickBound, name(pat))
		}
	}
}
