package sched

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// The webhook deliverer: a leader loop next to the scheduler's, with the
// same life (it starts after the barrier and ends with leadership). It
// works off the pending deliveries that Apply wrote into the replicated
// state (fsm/delivery.go), never off anything in memory, so a new leader
// carries on where the old one stopped: a try whose outcome was not
// committed is simply made again (at least once; receivers deduplicate by
// X-Foreman-Event-ID). Each try's outcome is committed (CmdDeliveries,
// batched); Apply decides the backoff or the end, so every node records
// the same history.
//
// Bounded: at most DeliveryConcurrency tries are in flight, each bounded
// by DeliveryTimeout, and a receiver's answer is drained up to 4 KiB, so
// an endpoint that hangs or answers 500 forever costs a slot for a
// timeout per try and nothing else.
type deliverer struct {
	raft   Raft
	state  State
	clk    Clock
	log    *slog.Logger
	client *http.Client
	conc   int
	tryFor time.Duration

	mu       sync.Mutex
	inflight map[string]bool // tried, outcome not yet committed
	outcomes []fsm.DeliveryOutcome
	wake     chan struct{} // one slot: a try ended (a slot is free)
	commit   chan struct{} // one slot: outcomes are waiting
}

func newDeliverer(s *Scheduler) *deliverer {
	return &deliverer{
		raft: s.raft, state: s.state, clk: s.clk, log: s.log.With("loop", "webhooks"),
		client: newDeliveryClient(), conc: s.cfg.DeliveryConcurrency, tryFor: s.cfg.DeliveryTimeout,
		inflight: map[string]bool{}, wake: make(chan struct{}, 1), commit: make(chan struct{}, 1),
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run delivers until ctx ends. Tries still in flight are abandoned with
// ctx (their deliveries stay pending for the next leader).
func (d *deliverer) run(ctx context.Context) {
	watch, stop := d.state.Watch()
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.commitLoop(ctx)
	}()
	defer d.client.CloseIdleConnections()
	for {
		now := d.clk.Now()
		d.mu.Lock()
		free := d.conc - len(d.inflight)
		d.mu.Unlock()
		var due []fsm.Delivery
		var next time.Time
		if free > 0 {
			err := d.state.View(func(tx *fsm.Tx) error {
				var err error
				due, next, err = tx.DueDeliveries(now, free, d.isInflight)
				return err
			})
			if err != nil {
				d.log.Warn("reading due deliveries", "err", err)
				next = now.Add(time.Second)
			}
		}
		for i := range due {
			dl := due[i]
			secret := d.secret(&dl)
			d.mu.Lock()
			d.inflight[dl.ID] = true
			d.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				tctx, cancel := context.WithTimeout(ctx, d.tryFor)
				out := tryDelivery(tctx, d.client, &dl, secret)
				cancel()
				if ctx.Err() != nil {
					return // leadership ended: the next leader tries again
				}
				if !out.Delivered {
					d.log.Info("webhook delivery failed", "delivery", dl.ID, "attempt", out.Attempt, "err", out.Error)
				}
				d.mu.Lock()
				d.outcomes = append(d.outcomes, out)
				d.mu.Unlock()
				poke(d.commit)
			}()
		}
		if !d.wait(ctx, watch, now, next) {
			return
		}
	}
}

// wait blocks until the state changes, a slot frees, next is due, or ctx
// ends (false).
func (d *deliverer) wait(ctx context.Context, watch <-chan struct{}, now, next time.Time) bool {
	var timer <-chan time.Time
	if !next.IsZero() {
		t := d.clk.NewTimer(next.Sub(now))
		defer t.Stop()
		timer = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case _, ok := <-watch:
		return ok
	case <-d.wake:
	case <-timer:
	}
	return true
}

func (d *deliverer) isInflight(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inflight[id]
}

// secret reads the hook's secret from the job's spec (it is never copied
// into delivery records, which the API shows).
func (d *deliverer) secret(dl *fsm.Delivery) string {
	var secret string
	_ = d.state.View(func(tx *fsm.Tx) error {
		spec, err := tx.JobSpec(dl.Event.JobID)
		if err == nil && dl.Hook < len(spec.Notify) {
			secret = spec.Notify[dl.Hook].Secret
		}
		return nil
	})
	return secret
}

// maxOutcomesPerEntry bounds one CmdDeliveries entry.
const maxOutcomesPerEntry = 256

// commitLoop commits outcomes in batches, then frees their slots.
func (d *deliverer) commitLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.commit:
		}
		for {
			d.mu.Lock()
			batch := d.outcomes[:min(len(d.outcomes), maxOutcomesPerEntry)]
			d.outcomes = d.outcomes[len(batch):]
			d.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			cmd := mustCommand(fsm.CmdDeliveries, d.clk.Now(), &fsm.DeliveryOutcomes{Outcomes: batch})
			if _, err := d.raft.Apply(ctx, cmd); err != nil && ctx.Err() == nil {
				// Not committed: the deliveries stay pending and are tried
				// again (at least once), after a pause.
				d.log.Warn("committing delivery outcomes", "err", err)
				t := d.clk.NewTimer(time.Second)
				select {
				case <-ctx.Done():
				case <-t.C():
				}
				t.Stop()
			}
			d.mu.Lock()
			for _, o := range batch {
				delete(d.inflight, o.ID)
			}
			d.mu.Unlock()
			poke(d.wake)
		}
	}
}
