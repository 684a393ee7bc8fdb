package workload

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/jepsen/checker"
	"github.com/foreman-sched/foreman/jepsen/client"
)

// OutputsScript writes an attempt's outputs, every byte derived from the
// job ID and the attempt (checker.OutputsArtifactBytes, OutputsStdout,
// OutputsStderr), then runs the probe (its records feed the submit
// checkers). yes's complaint about the closed pipe is dropped so stderr
// stays the one line the checker expects.
const OutputsScript = `r="$FOREMAN_JOB_ID $FOREMAN_ATTEMPT"
yes "$r" 2>/dev/null | head -c "$JEPSEN_SIZE" > "$FOREMAN_ARTIFACTS/` + checker.OutputsArtifact + `"
i=1; while [ "$i" -le "$JEPSEN_LINES" ]; do echo "line $i of $FOREMAN_JOB_ID attempt $FOREMAN_ATTEMPT"; i=$((i+1)); done
echo "stderr of $FOREMAN_JOB_ID attempt $FOREMAN_ATTEMPT" >&2
` + ProbeScript

// Outputs is the submit workload whose jobs write an artifact (a few KiB
// to a few MiB) and stdout and stderr lines, on agents with an object
// store (issue 25). After the drain it waits until every finished
// attempt's outputs are resolved (stored or partial), kills -9 the node
// holding the most stored objects, and reads every stored object twice:
// straight from the bucket (minio-go) and through the API of a node other
// than the attempt's. checker.Outputs judges the reads; the submit
// checkers (queue, execution, run_at, reads) run as for submit.
type Outputs struct {
	*Submit
	Sizes []int // data.bin sizes, one per key at random
	Lines []int // stdout lines
	// WantPartial: the store is down longer than the uploads' retry
	// (outputs-store-down-giveup), so some attempt must end partial, or
	// the run did not test the give-up path.
	WantPartial bool

	mu     sync.Mutex
	jobs   []checker.OutputsJob
	killed string // the node killed before the reads
	errs   []string
}

// NewOutputs returns the default outputs workload.
func NewOutputs() *Outputs {
	o := &Outputs{Submit: NewSubmit(), Sizes: []int{4 << 10, 64 << 10, 1 << 20, 3 << 20}, Lines: []int{1, 20, 200}}
	o.Submit.Interval = 300 * time.Millisecond
	o.Submit.Sleeps = []string{"0.3", "0.3", "1", "3"}
	o.Submit.Delays = nil
	o.Submit.Spec = o.spec
	return o
}

func (o *Outputs) Name() string { return "outputs" }

func pickFor(key, salt string, from []int) int {
	h := fnv.New32a()
	h.Write([]byte(salt + "/" + key))
	return from[int(h.Sum32()%uint32(len(from)))]
}

// sizeFor and linesFor derive a key's parameters from it: a retry sends
// the same spec, and the checker knows what each attempt wrote.
func (o *Outputs) sizeFor(key string) int  { return pickFor(key, "size", o.Sizes) }
func (o *Outputs) linesFor(key string) int { return pickFor(key, "lines", o.Lines) }

func (o *Outputs) spec(env *Env, key string) map[string]any {
	spec := ProbeSpec("jepsen-"+key, env.Dir, o.sleepFor(key))
	spec["command"] = []string{"/bin/sh", "-c", OutputsScript}
	e := spec["env"].(map[string]string)
	e["JEPSEN_SIZE"] = strconv.Itoa(o.sizeFor(key))
	e["JEPSEN_LINES"] = strconv.Itoa(o.linesFor(key))
	return spec
}

// Drain is Submit's (indeterminate keys resolved, every acknowledged job
// terminal, the final listing), then the outputs: wait, at most d more,
// until none is pending; kill the busiest node; read everything back.
func (o *Outputs) Drain(ctx context.Context, env *Env, d time.Duration) error {
	err := o.Submit.Drain(ctx, env, d)
	if o.NoFinal() {
		return err
	}
	if env.Store == nil {
		return errors.Join(err, errors.New("outputs: no object store in the environment"))
	}
	jobs := o.records(ctx, env, d)
	// Kill -9 the node that holds the most stored objects (a quorum of
	// servers stays): every read below must then come from the others.
	count := map[string]int{}
	for _, j := range jobs {
		for _, a := range j.Attempts {
			if a.Outputs != nil {
				count[a.Node] += len(a.Outputs.Objects)
			}
		}
	}
	killed := ""
	if env.Kill != nil && len(env.Clients) >= 3 {
		best := -1
		for i, cl := range env.Clients {
			if env.Alive(i) && (best < 0 || count[cl.Node] > count[env.Clients[best].Node]) {
				best = i
			}
		}
		if best >= 0 && count[env.Clients[best].Node] > 0 {
			if kerr := env.Kill(best); kerr != nil {
				err = errors.Join(err, fmt.Errorf("outputs: kill %s: %w", env.Clients[best].Node, kerr))
			} else {
				killed = env.Clients[best].Node
			}
		}
	}
	o.readBack(ctx, env, jobs)
	o.mu.Lock()
	o.jobs, o.killed = jobs, killed
	o.mu.Unlock()
	return err
}

// records polls the outputs records of every listed job until no attempt
// is pending (or d passes) and returns the last view.
func (o *Outputs) records(ctx context.Context, env *Env, d time.Duration) []checker.OutputsJob {
	deadline := time.Now().Add(d)
	final := o.Final()
	for {
		var jobs []checker.OutputsJob
		pending, failed := 0, 0
		for i, fj := range final {
			j := checker.OutputsJob{ID: fj.ID, Size: o.sizeFor(fj.IdempotencyKey), Lines: o.linesFor(fj.IdempotencyKey)}
			var atts []api.Attempt
			var err error
			for k := range env.Clients {
				c := (i + k) % len(env.Clients)
				if !env.Alive(c) {
					continue
				}
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, atts, err = env.Clients[c].JobOutputs(cctx, fj.ID)
				cancel()
				if err == nil {
					break
				}
			}
			if err != nil {
				failed++
			}
			for _, a := range atts {
				if a.Outputs != nil && a.Outputs.State == string(fsm.OutputsPending) {
					pending++
				}
				out, err := client.FSMOutputs(a.Outputs)
				if err != nil {
					failed++
					continue
				}
				j.Attempts = append(j.Attempts, checker.OutputsAttempt{Num: a.Attempt, Node: a.Node, State: string(a.State), Outputs: out})
			}
			jobs = append(jobs, j)
		}
		if pending == 0 && failed == 0 || time.Now().After(deadline) {
			if failed > 0 {
				o.mu.Lock()
				o.errs = append(o.errs, fmt.Sprintf("%d jobs' outputs records could not be read", failed))
				o.mu.Unlock()
			}
			return jobs
		}
		time.Sleep(time.Second) // polling uploads that retry with backoff
	}
}

// readBack reads every object reported stored from the bucket and through
// a live node other than the attempt's.
func (o *Outputs) readBack(ctx context.Context, env *Env, jobs []checker.OutputsJob) {
	for ji := range jobs {
		j := &jobs[ji]
		for ai := range j.Attempts {
			a := &j.Attempts[ai]
			if a.Outputs == nil || len(a.Outputs.Objects) == 0 {
				continue
			}
			a.Bucket, a.API = map[string]checker.ObjectRead{}, map[string]checker.ObjectRead{}
			for _, obj := range a.Outputs.Objects {
				a.Bucket[obj.Name] = o.readBucket(ctx, env, obj.Key)
				a.API[obj.Name] = o.readAPI(ctx, env, j.ID, a.Num, a.Node, obj.Name)
			}
		}
	}
}

func (o *Outputs) readBucket(ctx context.Context, env *Env, key string) checker.ObjectRead {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	obj, err := env.Store.GetObject(cctx, env.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return checker.ObjectRead{Err: err.Error()}
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return checker.ObjectRead{Err: err.Error()}
	}
	return checker.ReadOf(b)
}

// readAPI downloads through the first live node that is not holder,
// trying the others on a transport error or a 5xx.
func (o *Outputs) readAPI(ctx context.Context, env *Env, id string, attempt int, holder, name string) checker.ObjectRead {
	var cands []*client.Client
	for i, cl := range env.Clients {
		if env.Alive(i) && cl.Node != holder {
			cands = append(cands, cl)
		}
	}
	last := checker.ObjectRead{Err: "no live node other than " + holder}
	for _, cl := range cands {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		b, src, err := cl.Output(cctx, id, attempt, name)
		cancel()
		if err == nil {
			rd := checker.ReadOf(b)
			rd.Node, rd.Source = cl.Node, src
			return rd
		}
		last = checker.ObjectRead{Err: err.Error(), Node: cl.Node}
		var he *client.Error
		if errors.As(err, &he) && he.Status < 500 {
			return last // a definite answer: not there
		}
	}
	return last
}

func (o *Outputs) Check(env *Env, opt CheckOptions) []checker.Result {
	res := o.Submit.Check(env, opt)
	o.mu.Lock()
	jobs, killed, errs := o.jobs, o.killed, o.errs
	o.mu.Unlock()
	r := checker.Outputs(jobs)
	for _, e := range errs {
		r.Valid = false
		r.Errors = append(r.Errors, e)
	}
	if o.WantPartial && r.Stats["outputs_partial"] == 0 {
		r.Valid = false
		r.Errors = append(r.Errors, "the store was down longer than the uploads' retry, yet no attempt ended partial")
	}
	if killed != "" {
		r.Notes = append(r.Notes, "read back after kill -9 of "+killed+", the node holding the most stored objects")
		r.Stats["killed_before_reads"] = 1
	}
	if jobs == nil && !o.NoFinal() {
		r.Valid = false
		r.Errors = append(r.Errors, "no outputs records collected")
	}
	return append(res, r)
}
