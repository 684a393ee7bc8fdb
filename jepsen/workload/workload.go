package workload

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/foreman-sched/foreman/jepsen/checker"
	"github.com/foreman-sched/foreman/jepsen/client"
	"github.com/foreman-sched/foreman/jepsen/history"
)

// Env is what a workload runs against.
type Env struct {
	// Clients has one client per node; a worker sticks to one node so
	// minority-side clients see the partition.
	Clients []*client.Client
	Rec     *history.Recorder
	// Dir is where the probe jobs append their records (a host path every
	// namespace sees: they share the filesystem).
	Dir  string
	Seed uint64
	// Store reads the cluster's object store directly (the outputs
	// workload), Bucket is its bucket; nil without a store.
	Store  *minio.Client
	Bucket string
	// Kill crashes node i (kill -9) and leaves it down; nil: not allowed.
	Kill func(i int) error

	mu    sync.Mutex
	alive func(i int) bool
}

// SetAlive installs a filter the final phase uses to skip stopped nodes.
func (e *Env) SetAlive(f func(i int) bool) {
	e.mu.Lock()
	e.alive = f
	e.mu.Unlock()
}

// Alive reports whether node i is expected to answer.
func (e *Env) Alive(i int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.alive == nil || e.alive(i)
}

// Rand returns a deterministic generator for worker w.
func (e *Env) Rand(w int) *rand.Rand { return rand.New(rand.NewPCG(e.Seed, uint64(w)+1)) }

// Workload is one kind of traffic plus its checkers.
type Workload interface {
	Name() string
	// Run generates operations until ctx ends.
	Run(ctx context.Context, env *Env)
	// Drain resolves indeterminate operations and waits, at most d, for
	// the cluster to settle (every acknowledged job terminal), then
	// collects the final view.
	Drain(ctx context.Context, env *Env, d time.Duration) error
	// Check runs the workload's checkers; endOfTest is in the recorder's
	// time base.
	Check(env *Env, opt CheckOptions) []checker.Result
}

// CheckOptions are the scenario-level inputs of the checkers.
type CheckOptions struct {
	ClockBound time.Duration
	// ClockAhead is the largest wall-clock offset ahead of true time a
	// node had during the run (the clock nemesis); run_at may fire that
	// much early.
	ClockAhead time.Duration
	HTMLPath   string
	Events     []history.Event
	Timeout    time.Duration
	// NoReruns fails the execution check when any job ran more than once:
	// the fault (a live client declared down) must not cost any job a
	// rerun, not only never two executions at once.
	NoReruns bool
}

// firstAlive asks the alive nodes' clients in turn until one answers fn
// without an error; the last answer and error otherwise (zero and nil
// when no node is alive).
func firstAlive[T any](env *Env, fn func(*client.Client) (T, error)) (T, error) {
	var out T
	var err error
	for i := range env.Clients {
		if !env.Alive(i) {
			continue
		}
		if out, err = fn(env.Clients[i]); err == nil {
			break
		}
	}
	return out, err
}
