package sched

import (
	"context"
	"slices"
	"sync"

	"github.com/foreman-sched/foreman/fsm"
)

// Placing is a placement whose Place entry is being committed, with the
// queue of its job (for max_running).
type Placing struct {
	fsm.Placement
	Queue     string
	Namespace string // stored form ("" = default), for namespace quotas
}

// inflight is the leader loop's record of plans whose commands are being
// applied in the background (Config.PlansInFlight). Only plans made of
// placements and reasons go there: they touch jobs no other plan examines
// (Snapshot.Placing) and reasons, which Apply ignores once a job is no
// longer queued, so they commute with every later plan. A plan with any
// other command (a failure, a release, a lost attempt, a stop) first waits
// for all of them and is applied in order, as before.
//
// Why: a plan used to wait for its placements to commit before the loop
// looked at the next change. When a wave of finishes on several nodes
// reached the leader a few milliseconds apart, the last node's next job
// was placed one commit after the other's, one plan at a time.
type inflight struct {
	mu      sync.Mutex
	plans   map[int]inflightPlan
	next    int
	err     error         // the first failed background apply since taken
	done    chan struct{} // wakes the loop (coalesced) when a background apply ends
	changed chan struct{} // the same, for waitBelow
	wg      sync.WaitGroup
	applyFn func(ctx context.Context, cmds []*fsm.Command) error
}

type inflightPlan struct {
	placing []Placing
	reasons map[string]string
}

func newInflight(apply func(ctx context.Context, cmds []*fsm.Command) error) *inflight {
	return &inflight{plans: map[int]inflightPlan{}, done: make(chan struct{}, 1), changed: make(chan struct{}, 1), applyFn: apply}
}

// pending returns every in-flight plan's placements and reasons (a later
// plan's reason for a job wins).
func (f *inflight) pending() ([]Placing, map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]int, 0, len(f.plans))
	for id := range f.plans {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the plan's input in a fixed order
	var out []Placing
	var reasons map[string]string
	for _, id := range ids {
		p := f.plans[id]
		out = append(out, p.placing...)
		for j, r := range p.reasons {
			if reasons == nil {
				reasons = map[string]string{}
			}
			reasons[j] = r
		}
	}
	return out, reasons
}

func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.plans)
}

// start applies a plan's commands in the background; its placements and
// reasons stay in pending() until the apply returns (by then the local
// state holds them, or they failed).
func (f *inflight) start(ctx context.Context, dec *Decision) {
	f.mu.Lock()
	id := f.next
	f.next++
	f.plans[id] = inflightPlan{placing: dec.Placing, reasons: dec.Reasons}
	cmds := dec.Commands
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := f.applyFn(ctx, cmds)
		f.mu.Lock()
		delete(f.plans, id)
		if err != nil && f.err == nil {
			f.err = err
		}
		f.mu.Unlock()
		for _, ch := range []chan struct{}{f.done, f.changed} {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
}

// takeErr returns (and clears) the first failed background apply.
func (f *inflight) takeErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.err
	f.err = nil
	return err
}

// waitBelow blocks until fewer than n plans are in flight (n = 1: none).
// Only the loop's goroutine calls it.
func (f *inflight) waitBelow(ctx context.Context, n int) error {
	for f.count() >= n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.changed:
		}
	}
	return nil
}

// pipelinable reports whether a plan's commands may be applied in the
// background while later plans are made: placements and reasons only.
func pipelinable(cmds []*fsm.Command) bool {
	for _, c := range cmds {
		if c.Type != fsm.CmdPlace && c.Type != fsm.CmdSetReasons {
			return false
		}
	}
	return true
}
