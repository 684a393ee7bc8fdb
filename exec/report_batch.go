package exec

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/foreman-sched/foreman/fsm"
)

// BatchReporter sends many reports in one round trip (main: one
// fsm.CmdReportBatch raft entry). errs has one entry per report, nil for
// each that was applied; err set means none was (and errs is ignored).
type BatchReporter interface {
	ReportBatch(ctx context.Context, reps []fsm.ReportAttempt) (errs []error, err error)
}

// BatchingReporter is a Reporter that coalesces concurrent reports: a
// report goes out at once if fewer than MaxInFlight batches are in flight;
// otherwise it waits, with every other waiting report, for the next free
// slot and goes in that batch. So an idle node adds no delay, and a node
// finishing many attempts at once pays for a few raft entries instead of
// one per report; the delay is bounded by one in-flight round trip.
type BatchingReporter struct {
	send        BatchReporter
	maxInFlight int
	maxBatch    int

	mu       sync.Mutex
	queue    []*pendingReport
	inFlight int
}

type pendingReport struct {
	rep  fsm.ReportAttempt
	done chan error // buffered: the sender never blocks on a caller that left
}

// Batching defaults: two batches overlap (one being committed while the
// next forms); a batch holds at most 256 reports (each ≤ ~5 KiB with its
// stderr tail, so an entry stays around a megabyte at worst) and at most
// reportBatchResultBytes of job results (each up to fsm.ResultMax, 64 KiB:
// 256 of them would make a 16 MiB entry).
const (
	DefaultReportsInFlight = 2
	DefaultReportBatchMax  = 256
	reportBatchResultBytes = 1 << 20
)

// NewBatchingReporter returns a BatchingReporter with the defaults.
func NewBatchingReporter(send BatchReporter) *BatchingReporter {
	return &BatchingReporter{send: send, maxInFlight: DefaultReportsInFlight, maxBatch: DefaultReportBatchMax}
}

// Report implements Reporter. If ctx ends first it returns ctx.Err(): a
// report still waiting is dropped (the worker cancels the running report
// of a job that already finished; its final report carries the start
// time), one already in flight may still apply (reports are safe to
// repeat: a second running report is a no-op, a late one is refused as
// stale).
func (b *BatchingReporter) Report(ctx context.Context, rep fsm.ReportAttempt) error {
	p := &pendingReport{rep: rep, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, p)
	b.kickLocked()
	b.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		b.mu.Lock()
		if i := slices.Index(b.queue, p); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
		}
		b.mu.Unlock()
		return ctx.Err()
	}
}

// kickLocked starts a batch for the queued reports while a slot is free.
func (b *BatchingReporter) kickLocked() {
	for b.inFlight < b.maxInFlight && len(b.queue) > 0 {
		n, bytes := 0, 0
		for n < min(len(b.queue), b.maxBatch) {
			bytes += len(b.queue[n].rep.Result)
			if n > 0 && bytes > reportBatchResultBytes {
				break
			}
			n++
		}
		batch := b.queue[:n:n]
		b.queue = append([]*pendingReport(nil), b.queue[n:]...)
		b.inFlight++
		go b.flush(batch)
	}
}

func (b *BatchingReporter) flush(batch []*pendingReport) {
	reps := make([]fsm.ReportAttempt, len(batch))
	for i, p := range batch {
		reps[i] = p.rep
	}
	// Not a caller's context: the batch serves many callers. The cluster
	// bounds each apply with its own forward timeout.
	errs, err := b.send.ReportBatch(context.Background(), reps)
	if err == nil && len(errs) != len(batch) {
		err = fmt.Errorf("report batch: %d results for %d reports", len(errs), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			p.done <- err
		} else {
			p.done <- errs[i]
		}
	}
	b.mu.Lock()
	b.inFlight--
	b.kickLocked()
	b.mu.Unlock()
}
