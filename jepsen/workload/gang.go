package workload

import (
	"context"
	"errors"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"time"

	"github.com/foreman-sched/foreman/jepsen/checker"
)

// GangProbeScript is the body of every gang-workload job. It appends
// "<kind> <job> <attempt> <token> <node> <gang-index> <ns>" records to
// gang-<node>.log: start, a tick every 0.5 s, then end (exit 0), fail (the
// task chosen to fail, JEPSEN_FAIL_INDEX, exits 3 after two ticks: in the
// gang's first placement only when JEPSEN_FAIL is "first", in every one
// when "always") or term (the kill signal: gang stop, preemption, cancel;
// it writes a checkpoint before exiting, as a training job would).
const GangProbeScript = `d="$JEPSEN_DIR"; n="$FOREMAN_NODE"; g="${GANG_INDEX:--1}"
r="$FOREMAN_JOB_ID $FOREMAN_ATTEMPT $FOREMAN_FENCING_TOKEN $n $g"
f="$d/gang-$n.log"
trap 'echo "term $r $(date +%s%N)" >> "$f"; echo "$FOREMAN_ATTEMPT" > "$FOREMAN_CHECKPOINT/ck"; exit 143' TERM
echo "start $r $(date +%s%N)" >> "$f"
i=0
while [ "$i" -lt "$JEPSEN_TICKS" ]; do
  sleep 0.5; echo "tick $r $(date +%s%N)" >> "$f"; i=$((i+1))
  if [ "$g" = "$JEPSEN_FAIL_INDEX" ] && [ "$i" -ge 2 ]; then
    if [ "$JEPSEN_FAIL" = always ] || [ "$FOREMAN_ATTEMPT" -le "${GANG_SIZE:-1}" ]; then
      echo "fail $r $(date +%s%N)" >> "$f"; exit 3
    fi
  fi
done
echo "end $r $(date +%s%N)" >> "$f"
`

// Gang is the submit workload with gang, low-priority and high-priority
// jobs on agents of two CPUs each (every job asks for one): gangs of two or
// three tasks (at most the node count), some with a task that fails in the
// first placement or in every one, priority 60 (not preemptible) or 20;
// priority-10 single jobs that fill the cluster; priority-90 single jobs
// that must preempt them. Its checkers: submit-queue, gang-partial,
// gang-placements, preempted and the reads.
type Gang struct {
	*Submit
	// Grace is every job's kill_timeout; Lease and Margin the agents' lease
	// and the scheduler's safety margin (defaults); Slack covers lost
	// detection and an election. GangPartial's bound is their sum.
	Grace, Lease, Margin, Slack time.Duration
	nodes                       int
}

// GangAgentFlags are the agent flags the gang workload needs: two CPUs a
// node, so one-CPU jobs fill the cluster and high priorities preempt.
var GangAgentFlags = []string{"--cpu", "2", "--reserve-cpu", "0"}

// NewGang returns the gang workload for a cluster of nodes agents.
func NewGang(nodes int) *Gang {
	g := &Gang{Submit: NewSubmit(), Grace: 2 * time.Second, Lease: 6 * time.Second, Margin: 3 * time.Second,
		Slack: 4 * time.Second, nodes: nodes}
	g.Submit.Workers, g.Submit.Interval, g.Submit.SubmitRatio = 2, 900*time.Millisecond, 0.6
	g.Submit.Spec = g.spec
	return g
}

func (g *Gang) Name() string { return "gang" }

// kindOf derives everything about a key's job from the key, so a retry of
// an indeterminate submit sends the very same spec.
type gangKind struct {
	kind     string // "gang", "low", "high"
	size     int
	priority int
	ticks    int
	failIdx  int // -2: none
	failMode string
}

func (g *Gang) kindOf(key string) gangKind {
	h := fnv.New64a()
	h.Write([]byte("gang/" + key))
	v := h.Sum64()
	pick := func(n uint64) int { r := int(v % n); v /= n; return r }
	k := gangKind{failIdx: -2}
	switch c := pick(20); {
	case c < 8:
		k.kind = "gang"
		k.size = 2 + pick(2)
		if k.size > g.nodes {
			k.size = g.nodes
		}
		k.priority = []int{60, 60, 20}[pick(3)]
		k.ticks = []int{4, 8, 40}[pick(3)]
		switch f := pick(20); {
		case f < 9:
			k.failIdx, k.failMode = pick(uint64(k.size)), "first"
		case f < 12:
			k.failIdx, k.failMode = pick(uint64(k.size)), "always"
		}
	case c < 15:
		k.kind, k.priority, k.ticks = "low", 10, 6
	default:
		k.kind, k.priority, k.ticks = "high", 90, 2
	}
	return k
}

// MayFail: only a gang with an "always" failing task may end failed.
func (g *Gang) MayFail(key string) bool { return g.kindOf(key).failMode == "always" }

func (g *Gang) spec(env *Env, key string) map[string]any {
	k := g.kindOf(key)
	spec := map[string]any{
		"name":         "jepsen-" + k.kind + "-" + key,
		"command":      []string{"/bin/sh", "-c", GangProbeScript},
		"driver":       "process",
		"priority":     k.priority,
		"max_attempts": 5,
		"kill_timeout": g.Grace.String(),
		"resources":    map[string]any{"cpu": "1"},
		"backoff":      map[string]any{"initial": "500ms"},
		"env": map[string]string{
			"JEPSEN_DIR":        env.Dir,
			"JEPSEN_TICKS":      strconv.Itoa(k.ticks),
			"JEPSEN_FAIL_INDEX": strconv.Itoa(k.failIdx),
			"JEPSEN_FAIL":       k.failMode,
			"PATH":              "/usr/local/bin:/usr/bin:/bin",
		},
	}
	if k.kind == "gang" {
		spec["gang"] = map[string]any{"size": k.size}
		if k.failMode == "always" {
			spec["max_attempts"] = 2
		}
	}
	return spec
}

// Options are the gang checkers' bounds.
func (g *Gang) Options(opt CheckOptions) checker.GangOptions {
	return checker.GangOptions{Bound: g.Grace + g.Lease + g.Margin + g.Slack, TickBound: TickEvery + 500*time.Millisecond,
		ClockBound: opt.ClockBound}
}

func (g *Gang) Drain(ctx context.Context, env *Env, d time.Duration) error {
	return g.Submit.Drain(ctx, env, d)
}

func (g *Gang) Run(ctx context.Context, env *Env) { g.Submit.Run(ctx, env) }

// Check runs submit-queue, the three gang checkers and the reads.
func (g *Gang) Check(env *Env, opt CheckOptions) []checker.Result {
	ops := env.Rec.Ops()
	reads := checker.Reads(ops, checker.LinearOptions{Timeout: opt.Timeout, HTMLPath: opt.HTMLPath, Events: opt.Events})
	if g.NoFinal() {
		return []checker.Result{reads}
	}
	recs, torn, err := checker.ReadFiles(filepath.Join(env.Dir, "gang-*.log"), checker.ParseGangRecords)
	final := g.Final()
	gopt := g.Options(opt)
	partial := checker.GangPartial(recs, gopt)
	pl := checker.GangPlacements(recs, final, gopt)
	pre := checker.Preempted(recs, final, g.Acked(), checker.PreemptedOptions{MayFail: g.MayFail})
	if err != nil {
		for _, r := range []*checker.Result{&partial, &pl, &pre} {
			r.Valid = false
			r.Errors = append(r.Errors, "reading records: "+err.Error())
		}
	}
	pl.Stats["torn_records"] = torn
	kinds := map[string]int{}
	for key := range g.Acked() {
		kinds[g.kindOf(key).kind]++
	}
	pre.Stats["acked_gangs"], pre.Stats["acked_low"], pre.Stats["acked_high"] = kinds["gang"], kinds["low"], kinds["high"]
	if pre.Stats["victims"] == 0 {
		pre.Notes = append(pre.Notes, "no job was preempted in this run: the checker had nothing to check")
	}
	res := []checker.Result{checker.Queue(ops, final), partial, pl, pre, reads}
	if len(recs) == 0 {
		res[1].Valid = false
		res[1].Errors = append(res[1].Errors, errors.New("no gang records at all: the probes never ran").Error())
	}
	return res
}
