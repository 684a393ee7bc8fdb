package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/jepsen/checker"
	"github.com/foreman-sched/foreman/jepsen/client"
	"github.com/foreman-sched/foreman/jepsen/history"
)

// DAG submits workflows of probe jobs — diamonds with a failing branch
// (children with success, failure and always conditions), chains,
// fan-outs joined by an always job, and arrays (%2, an index failing
// sometimes) with a success and an always child — and, after half of them, a plain job
// with after on two of the workflow's jobs, each with a random requirement
// (ok, any, failed, cancelled), half of those also singleton jobs of one
// name (each then waits for the one before it too). It checks invariant 4 on the probes'
// records (checker.DAG: no child starts before its parents' deciding
// finish; no skipped job ever starts; an after job runs only when every
// requirement was met, and is cancelled when one was broken; an array
// ends as its tasks did, each index made once, never more than %2 running)
// and that every workflow and after job finishes.
type DAG struct {
	Workers  int
	Interval time.Duration

	mu     sync.Mutex
	final  []checker.DAGJob
	open   []string // workflows and after jobs still running after the drain
	afters []string // the after jobs submitted
}

// NewDAG returns the default DAG workload.
func NewDAG() *DAG { return &DAG{Workers: 2, Interval: 700 * time.Millisecond} }

func (d *DAG) Name() string { return "dag" }

func (d *DAG) Run(ctx context.Context, env *Env) {
	var wg sync.WaitGroup
	for w := 0; w < d.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := env.Rand(100 + w)
			cl := env.Clients[w%len(env.Clients)]
			for seq := 0; ; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d.Interval/2 + time.Duration(rng.Int64N(int64(d.Interval)))):
				}
				wf := d.shape(env, rng, fmt.Sprintf("s%d-w%d-%d", env.Seed, w, seq))
				op := history.Op{Process: w, Kind: history.Submit, Node: cl.Node, Key: wf["name"].(string), Call: env.Rec.Now()}
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				id, err := cl.SubmitWorkflow(sctx, wf)
				cancel()
				op.Return, op.JobID, op.Outcome = env.Rec.Now(), id, client.Classify(err)
				if err != nil {
					op.Err = err.Error()
				}
				env.Rec.Add(op)
				if err == nil && rng.IntN(2) == 0 {
					d.submitAfter(ctx, env, rng, w, cl, id)
				}
			}
		}()
	}
	wg.Wait()
}

// afterOns are the requirements an after job draws from, weighted so that
// about half of the after jobs run.
var afterOns = []string{"ok", "ok", "any", "any", "failed", "cancelled"}

// submitAfter submits a probe job after two random jobs of workflow wf,
// each with a random requirement. Only an acknowledged one is checked.
func (d *DAG) submitAfter(ctx context.Context, env *Env, rng *rand.Rand, w int, cl *client.Client, wf string) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, jobs, err := cl.Workflow(sctx, wf)
	if err != nil || len(jobs) < 2 {
		return
	}
	perm := rng.Perm(len(jobs))
	spec := ProbeSpec("after-"+wf, env.Dir, "0.1")
	spec["max_attempts"] = 1
	spec["env"].(map[string]string)["JEPSEN_EXIT"] = "0"
	var after []string
	for _, i := range perm[:2] {
		after = append(after, jobs[i].ID+":"+afterOns[rng.IntN(len(afterOns))])
	}
	spec["after"] = after
	if rng.IntN(2) == 0 {
		// One name for all: they run one at a time, each after the one
		// submitted before it (an after parent with requirement any).
		spec["name"], spec["singleton"] = "jepsen-singleton", true
	}
	key := fmt.Sprintf("jepsen-after-%s", wf)
	op := history.Op{Process: w, Kind: history.Submit, Node: cl.Node, Key: key, Call: env.Rec.Now()}
	id, _, err := cl.Submit(sctx, spec, key)
	op.Return, op.JobID, op.Outcome = env.Rec.Now(), id, client.Classify(err)
	if err != nil {
		op.Err = err.Error()
	}
	env.Rec.Add(op)
	if err == nil {
		d.mu.Lock()
		d.afters = append(d.afters, id)
		d.mu.Unlock()
	}
}

// shape builds one random workflow body.
func (d *DAG) shape(env *Env, rng *rand.Rand, name string) map[string]any {
	job := func(n string, sleep string, exit int, deps []string, cond string) map[string]any {
		spec := ProbeSpec(n, env.Dir, sleep)
		spec["max_attempts"] = 1
		spec["env"].(map[string]string)["JEPSEN_EXIT"] = fmt.Sprint(exit)
		if len(deps) > 0 {
			spec["depends_on"] = deps
		}
		if cond != "" {
			spec["condition"] = cond
		}
		return spec
	}
	var jobs []map[string]any
	switch rng.IntN(4) {
	case 3: // an array between a root and two joins; one index fails sometimes
		arr := job("arr", "0.2", 0, []string{"root"}, "")
		arr["array"] = fmt.Sprintf("0-%d%%2", 3+rng.IntN(4))
		arr["env"].(map[string]string)["JEPSEN_FAIL_INDEX"] = fmt.Sprint([]int{-1, -1, 1, 2}[rng.IntN(4)])
		jobs = []map[string]any{
			job("root", "0.2", 0, nil, ""),
			arr,
			job("next", "0.2", 0, []string{"arr"}, ""),
			job("after", "0.2", 0, []string{"arr"}, "always"),
		}
	case 0: // diamond with a branch that fails half the time
		jobs = []map[string]any{
			job("a", "0.3", 0, nil, ""),
			job("b", "0.5", rng.IntN(2), []string{"a"}, ""),
			job("c", "0.3", 0, []string{"a"}, ""),
			job("d", "0.2", 0, []string{"b", "c"}, ""),
			job("e", "0.2", 0, []string{"b"}, "failure"),
			job("f", "0.2", 0, []string{"d"}, "always"),
			job("g", "0.2", 0, []string{"b", "c"}, "one_success"),
		}
	case 1: // chain, the middle link failing sometimes
		fail := rng.IntN(3) == 0
		prev := ""
		for i := range 5 {
			exit := 0
			if fail && i == 2 {
				exit = 1
			}
			var deps []string
			if prev != "" {
				deps = []string{prev}
			}
			n := fmt.Sprint("c", i)
			jobs = append(jobs, job(n, "0.2", exit, deps, ""))
			prev = n
		}
	default: // fan-out joined by an always job
		jobs = append(jobs, job("root", "0.2", 0, nil, ""))
		var leaves []string
		for i := range 8 {
			n := fmt.Sprint("leaf", i)
			jobs = append(jobs, job(n, "0.3", rng.IntN(4)/3, []string{"root"}, ""))
			leaves = append(leaves, n)
		}
		jobs = append(jobs, job("join", "0.2", 0, leaves, "always"))
	}
	return map[string]any{"name": name, "jobs": jobs}
}

// Drain waits, at most dur, until no workflow is running, then collects
// every workflow's jobs (indeterminate submits included: whatever was
// stored is checked).
func (d *DAG) Drain(ctx context.Context, env *Env, dur time.Duration) error {
	deadline := time.Now().Add(dur)
	var lastErr error
	for {
		open, jobs, err := d.collect(ctx, env)
		if err == nil {
			d.mu.Lock()
			d.final, d.open = jobs, open
			d.mu.Unlock()
			if len(open) == 0 {
				return nil
			}
		}
		lastErr = err
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("dag drain: %w", lastErr)
			}
			return nil // the check reports the open workflows
		}
		time.Sleep(time.Second)
	}
}

func (d *DAG) collect(ctx context.Context, env *Env) (open []string, jobs []checker.DAGJob, err error) {
	for i, cl := range env.Clients {
		if !env.Alive(i) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		ids, err := cl.WorkflowIDs(cctx)
		if err != nil {
			cancel()
			continue
		}
		for _, id := range ids {
			state, js, err := cl.Workflow(cctx, id)
			if err != nil {
				cancel()
				return nil, nil, err
			}
			if state == "running" {
				open = append(open, id)
			}
			jobs = append(jobs, js...)
		}
		d.mu.Lock()
		afters := append([]string(nil), d.afters...)
		d.mu.Unlock()
		for _, id := range afters {
			j, err := cl.AfterJob(cctx, id)
			if err != nil {
				cancel()
				return nil, nil, err
			}
			if !terminalState(j.State) {
				open = append(open, id)
			}
			jobs = append(jobs, j)
		}
		cancel()
		return open, jobs, nil
	}
	return nil, nil, errors.New("no node answered the workflow listing")
}

func (d *DAG) Check(env *Env, opt CheckOptions) []checker.Result {
	exec, _, err := checker.ReadRecordFiles(filepath.Join(env.Dir, "exec-*.log"))
	d.mu.Lock()
	final, open := d.final, d.open
	d.mu.Unlock()
	r := checker.DAG(exec, final, opt.ClockBound)
	if err != nil {
		r.Valid = false
		r.Errors = append(r.Errors, "records: "+err.Error())
	}
	done := checker.Result{Name: "dag-finished", Valid: len(open) == 0, Stats: map[string]int{"open": len(open)}}
	if len(open) > 0 {
		done.Errors = append(done.Errors, fmt.Sprintf("%d workflows or after jobs still running after the drain, e.g. %s", len(open), open[0]))
	}
	return []checker.Result{r, done}
}

func terminalState(s string) bool {
	switch s {
	case "succeeded", "failed", "cancelled", "skipped":
		return true
	}
	return false
}
