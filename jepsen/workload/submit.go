package workload

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/jepsen/checker"
	"github.com/foreman-sched/foreman/jepsen/client"
	"github.com/foreman-sched/foreman/jepsen/history"
)

// Submit submits probe jobs and reads their status consistently. It checks
// invariants 1 and 5 (total-queue over idempotency keys), 2 (execution
// records and the fencing sink) and 9 (porcupine over consistent reads).
type Submit struct {
	Workers  int
	Interval time.Duration // pause between one worker's ops
	// Sleeps are probe durations (seconds) picked at random per job: short
	// ones for throughput, long ones so jobs straddle faults and leases.
	Sleeps []string
	// SubmitRatio is the share of ops that are submits (the rest reads).
	SubmitRatio float64
	// Delays are run_at offsets from the first submit of a key; a key gets
	// one at random, 0 meaning "no run_at". Delayed jobs give a skewed
	// clock something to break (checker.RunAt).
	Delays []time.Duration
	// Spec, when set, builds the job spec of a key instead of a probe
	// (the gang workload); it must give a retry the same spec.
	Spec func(env *Env, key string) map[string]any

	mu      sync.Mutex
	pending map[string]int // indeterminate key -> worker
	acked   map[string]string
	runAt   map[string]time.Time // key -> run_at sent (the same on retries)
	final   []checker.FinalJob
	noFinal bool // the final listing failed: no verdict on the product
	endNs   int64
	// The usage accounting check (checker.Usage): when traffic started
	// (host clock), whether accounting was on by then, and the final
	// report.
	started time.Time
	usageOn bool
	usage   checker.UsageReading
}

// NewSubmit returns the default submit workload.
func NewSubmit() *Submit {
	return &Submit{Workers: 3, Interval: 150 * time.Millisecond, Sleeps: []string{"0.3", "0.3", "0.3", "0.3", "3", "3", "10"}, SubmitRatio: 0.4,
		Delays: []time.Duration{0, 0, 0, time.Second, 2 * time.Second}}
}

func (s *Submit) Name() string { return "submit" }

func (s *Submit) init() {
	s.mu.Lock()
	if s.pending == nil {
		s.pending, s.acked, s.runAt = map[string]int{}, map[string]string{}, map[string]time.Time{}
	}
	s.mu.Unlock()
}

// usageWait bounds the wait for usage accounting to be on (the leader
// proposes it once every server has the feature) before traffic starts.
const usageWait = 30 * time.Second

// Run waits for usage accounting to be on, then starts Workers
// goroutines; worker w talks to node w mod N.
func (s *Submit) Run(ctx context.Context, env *Env) {
	s.init()
	s.started = time.Now()
	s.usageOn = s.waitUsage(ctx, env)
	var wg sync.WaitGroup
	for w := 0; w < s.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.worker(ctx, env, w)
		}()
	}
	wg.Wait()
}

func (s *Submit) worker(ctx context.Context, env *Env, w int) {
	rng := env.Rand(w)
	cl := env.Clients[w%len(env.Clients)]
	var mine []string // this worker's acknowledged jobs
	var retry []string
	for seq := 0; seq < 100000; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.Interval/2 + time.Duration(rng.Int64N(int64(s.Interval)))):
		}
		switch {
		case len(retry) > 0 && rng.Float64() < 0.5:
			// Indeterminate submits are retried with the same key.
			key := retry[0]
			if id, out := s.submit(ctx, env, cl, w, key); out != history.Info {
				retry = retry[1:]
				if out == history.OK {
					mine = append(mine, id)
				}
			}
		case len(mine) == 0 || rng.Float64() < s.SubmitRatio:
			key := fmt.Sprintf("s%d-w%d-%d", env.Seed, w, seq)
			id, out := s.submit(ctx, env, cl, w, key)
			switch out {
			case history.OK:
				mine = append(mine, id)
			case history.Info:
				retry = append(retry, key)
			}
		default:
			// Favour recent jobs: they are the ones still moving.
			n := min(len(mine), 10)
			id := mine[len(mine)-1-rng.IntN(n)]
			s.read(ctx, env, cl, w, id)
		}
	}
}

// waitUsage polls the usage report until accounting is on: every attempt
// of the run must end after the marker for checker.Usage to count it.
func (s *Submit) waitUsage(ctx context.Context, env *Env) bool {
	ctx, cancel := context.WithTimeout(ctx, usageWait)
	defer cancel()
	for i := 0; ; i++ {
		cl := env.Clients[i%len(env.Clients)]
		if on, _, err := cl.UsageAttempts(ctx, s.started.Add(-time.Hour), time.Now().Add(time.Hour)); err == nil && on {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sleepFor derives the probe duration from the key, so a retry sends the
// very same spec (an API may refuse a reused key with a different body).
func (s *Submit) sleepFor(key string) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return s.Sleeps[int(h.Sum32()%uint32(len(s.Sleeps)))]
}

// runAtFor returns the key's run_at (zero: none), fixed at its first
// submit so a retry sends the same spec.
func (s *Submit) runAtFor(key string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.runAt[key]; ok || len(s.Delays) == 0 {
		return t
	}
	h := fnv.New32a()
	h.Write([]byte("delay/" + key))
	var t time.Time
	if d := s.Delays[int(h.Sum32()%uint32(len(s.Delays)))]; d > 0 {
		t = time.Now().Add(d).Round(time.Millisecond).UTC() // the host clock: true time
	}
	s.runAt[key] = t
	return t
}

// RunAts maps the keys of delayed jobs to their run_at (unix ns).
func (s *Submit) RunAts() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for k, t := range s.runAt {
		if !t.IsZero() {
			out[k] = t.UnixNano()
		}
	}
	return out
}

func (s *Submit) submit(ctx context.Context, env *Env, cl *client.Client, w int, key string) (string, history.Outcome) {
	var spec map[string]any
	if s.Spec != nil {
		spec = s.Spec(env, key)
	} else {
		spec = ProbeSpec("jepsen-"+key, env.Dir, s.sleepFor(key))
		if t := s.runAtFor(key); !t.IsZero() {
			spec["run_at"] = t.Format(time.RFC3339Nano)
		}
	}
	op := history.Op{Process: w, Kind: history.Submit, Node: cl.Node, Key: key, Call: env.Rec.Now()}
	id, dup, err := cl.Submit(ctx, spec, key)
	op.Return, op.Outcome, op.JobID, op.Duplicate = env.Rec.Now(), client.Classify(err), id, dup
	if err != nil {
		op.Err = err.Error()
		op.JobID = ""
	}
	if ctx.Err() != nil && op.Outcome == history.Fail {
		op.Outcome = history.Info // cancelled by the harness, not refused
	}
	env.Rec.Add(op)
	s.mu.Lock()
	switch op.Outcome {
	case history.OK:
		delete(s.pending, key)
		s.acked[key] = id
	case history.Info:
		s.pending[key] = w
	default:
		delete(s.pending, key)
	}
	s.mu.Unlock()
	return id, op.Outcome
}

func (s *Submit) read(ctx context.Context, env *Env, cl *client.Client, w int, id string) *api.JobDetail {
	op := history.Op{Process: w, Kind: history.Read, Node: cl.Node, JobID: id, Call: env.Rec.Now()}
	v, err := cl.Job(ctx, id, true)
	op.Return = env.Rec.Now()
	switch {
	case errors.Is(err, client.ErrNotFound):
		op.Outcome, op.NotFound = history.OK, true
	case err != nil:
		op.Outcome, op.Err = history.Info, err.Error()
	default:
		op.Outcome, op.State, op.ModifyIndex = history.OK, string(v.Job.State), v.Job.ModifyIndex
	}
	env.Rec.Add(op)
	if err != nil {
		return nil
	}
	return v
}

// Drain retries every indeterminate key, then polls until every
// acknowledged job is terminal, then lists the cluster's jobs.
func (s *Submit) Drain(ctx context.Context, env *Env, d time.Duration) error {
	s.init()
	deadline := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	pick := func(i int) *client.Client {
		for k := 0; k < len(env.Clients); k++ {
			if j := (i + k) % len(env.Clients); env.Alive(j) {
				return env.Clients[j]
			}
		}
		return env.Clients[0]
	}
	drainer := s.Workers // process id of the final phase
	for round := 0; ; round++ {
		s.mu.Lock()
		keys := slices.Sorted(maps.Keys(s.pending))
		s.mu.Unlock()
		if len(keys) == 0 || ctx.Err() != nil {
			break
		}
		for i, k := range keys {
			s.submit(ctx, env, pick(round+i), drainer, k)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for round := 0; ctx.Err() == nil; round++ {
		s.mu.Lock()
		ids := make([]string, 0, len(s.acked))
		for _, id := range s.acked {
			ids = append(ids, id)
		}
		s.mu.Unlock()
		sort.Strings(ids)
		open := 0
		for i, id := range ids {
			v := s.read(ctx, env, pick(round+i), drainer, id)
			if v == nil || !v.Job.State.Terminal() {
				open++
			}
		}
		if open == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	s.endNs = env.Rec.Now()
	// The final view: a listing plus each job's attempts, bounded by a
	// fresh deadline so a stuck cluster still yields a report.
	lctx, lcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer lcancel()
	jobs, err := firstAlive(env, func(cl *client.Client) ([]checker.FinalJob, error) { return cl.ListJobs(lctx) })
	if err != nil {
		s.noFinal = true
		return fmt.Errorf("final listing: %w", err)
	}
	for i := range jobs {
		for k := range env.Clients {
			cl := pick(i + k)
			v, err := cl.Job(lctx, jobs[i].ID, true)
			if err == nil {
				jobs[i].State, jobs[i].Attempts = string(v.Job.State), client.FinalAttempts(v.Attempts)
				if jobs[i].IdempotencyKey == "" {
					jobs[i].IdempotencyKey = v.Job.IdempotencyKey
				}
				break
			}
		}
	}
	s.final = jobs
	s.readUsage(lctx, env)
	if ctx.Err() != nil {
		return fmt.Errorf("drain: not every acknowledged job terminal within %v", d)
	}
	return nil
}

// readUsage reads the run's usage report for checker.Usage, after the
// final view. The window reaches an hour either side of the run: records
// are hourly, stamped with the leader's clock (which the clock nemesis
// skews), and the cluster is the run's own.
func (s *Submit) readUsage(ctx context.Context, env *Env) {
	since, until := s.started.Add(-time.Hour), time.Now().Add(time.Hour)
	type reading struct {
		on bool
		n  int64
	}
	r, err := firstAlive(env, func(cl *client.Client) (reading, error) {
		on, n, err := cl.UsageAttempts(ctx, since, until)
		return reading{on, n}, err
	})
	s.usage = checker.UsageReading{Enabled: s.usageOn && r.on, Attempts: r.n}
	if err != nil {
		s.usage.Err = err.Error()
	}
}

// Acked returns the acknowledged keys and their job IDs.
func (s *Submit) Acked() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.acked))
	for k, v := range s.acked {
		out[k] = v
	}
	return out
}

// EndNs is when the drain stopped waiting (recorder time base).
func (s *Submit) EndNs() int64 { return s.endNs }

// NoFinal reports whether the final listing failed.
func (s *Submit) NoFinal() bool { return s.noFinal }

// Final returns the collected final view.
func (s *Submit) Final() []checker.FinalJob { return s.final }

// Check runs the submit, execution and read checkers.
func (s *Submit) Check(env *Env, opt CheckOptions) []checker.Result {
	ops := env.Rec.Ops()
	if s.noFinal {
		return []checker.Result{checker.Reads(ops, checker.LinearOptions{Timeout: opt.Timeout, HTMLPath: opt.HTMLPath, Events: opt.Events})}
	}
	res := []checker.Result{checker.Queue(ops, s.final)}
	exec, torn1, err1 := checker.ReadRecordFiles(filepath.Join(env.Dir, "exec-*.log"))
	sink, torn2, err2 := checker.ReadRecordFiles(filepath.Join(env.Dir, "sink.log"))
	end := env.Rec.Base().Add(time.Duration(s.endNs)).UnixNano()
	ex := checker.Execution(exec, sink, s.final, checker.ExecOptions{ClockBound: opt.ClockBound, EndOfTest: end,
		TickBound: TickEvery + 500*time.Millisecond})
	if err := errors.Join(err1, err2); err != nil {
		ex.Valid = false
		ex.Errors = append(ex.Errors, "reading records: "+err.Error())
	}
	ex.Stats["torn_records"] = torn1 + torn2
	if n := ex.Stats["re_executed_jobs"]; opt.NoReruns && n > 0 {
		ex.Valid = false
		ex.Errors = append(ex.Errors, fmt.Sprintf("%d jobs ran more than once, but no node was really lost", n))
	}
	res = append(res, ex)
	res = append(res, checker.RunAt(exec, s.final, s.RunAts(), checker.RunAtOptions{Ahead: opt.ClockAhead, ClockBound: opt.ClockBound}))
	res = append(res, checker.Reads(ops, checker.LinearOptions{Timeout: opt.Timeout, HTMLPath: opt.HTMLPath, Events: opt.Events}))
	res = append(res, checker.Usage(s.final, s.usage))
	return res
}
