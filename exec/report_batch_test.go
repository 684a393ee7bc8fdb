package exec

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// fakeBatchSender records batches; each call blocks until release gets a value.
type fakeBatchSender struct {
	mu      sync.Mutex
	batches [][]fsm.ReportAttempt
	release chan error
	perItem func(fsm.ReportAttempt) error
}

func (f *fakeBatchSender) ReportBatch(ctx context.Context, reps []fsm.ReportAttempt) ([]error, error) {
	f.mu.Lock()
	f.batches = append(f.batches, reps)
	f.mu.Unlock()
	if err := <-f.release; err != nil {
		return nil, err
	}
	errs := make([]error, len(reps))
	for i, r := range reps {
		if f.perItem != nil {
			errs[i] = f.perItem(r)
		}
	}
	return errs, nil
}

func (f *fakeBatchSender) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.batches)
}

// TestBatchingReporterCoalesces: the first MaxInFlight reports go out at
// once; everything that arrives meanwhile shares the next batch; per-item
// and whole-batch errors reach the right callers.
func TestBatchingReporterCoalesces(t *testing.T) {
	stale := fmt.Errorf("%w: superseded", fsm.ErrStaleToken)
	f := &fakeBatchSender{release: make(chan error), perItem: func(r fsm.ReportAttempt) error {
		if r.JobID == "stale" {
			return stale
		}
		return nil
	}}
	b := NewBatchingReporter(f)
	ctx := context.Background()
	results := make(chan error, 100)
	report := func(job string) { go func() { results <- b.Report(ctx, fsm.ReportAttempt{JobID: job}) }() }

	report("a")
	report("b")
	waitFor(t, waitShort, "two batches in flight", func() bool { return f.count() == 2 })
	const queued = 20
	for i := range queued {
		report(fmt.Sprintf("q%d", i))
	}
	report("stale")
	waitFor(t, waitShort, "all reports queued", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == queued+1
	})
	if n := f.count(); n != 2 {
		t.Fatalf("%d batches sent while two were in flight, want 2", n)
	}
	f.release <- nil // a
	waitFor(t, waitShort, "third batch", func() bool { return f.count() == 3 })
	f.mu.Lock()
	if got := len(f.batches[2]); got != queued+1 {
		t.Errorf("third batch has %d reports, want all %d waiting ones", got, queued+1)
	}
	f.mu.Unlock()
	f.release <- errors.New("leader unreachable") // b: the whole batch fails
	f.release <- nil                              // the big batch
	var ok, staleErrs, failed int
	for range queued + 3 {
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.Is(err, fsm.ErrStaleToken):
			staleErrs++
		default:
			failed++
		}
	}
	if ok != queued+1 || staleErrs != 1 || failed != 1 {
		t.Errorf("ok %d, stale %d, failed %d; want %d, 1, 1", ok, staleErrs, failed, queued+1)
	}
}

// TestBatchingReporterCallerContext: a caller whose context ends stops
// waiting; the batch still completes for the others.
func TestBatchingReporterCallerContext(t *testing.T) {
	f := &fakeBatchSender{release: make(chan error)}
	b := NewBatchingReporter(f)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Report(ctx, fsm.ReportAttempt{JobID: "x"}) }()
	waitFor(t, waitShort, "batch in flight", func() bool { return f.count() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Report = %v, want context.Canceled", err)
	}
	f.release <- nil
	waitFor(t, waitShort, "slot freed", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.inFlight == 0
	})
}

// TestBatchingReporterDropsAbandoned: a report whose caller gave up while it
// still waited for a slot is not sent.
func TestBatchingReporterDropsAbandoned(t *testing.T) {
	f := &fakeBatchSender{release: make(chan error)}
	b := NewBatchingReporter(f)
	ctx := context.Background()
	results := make(chan error, 4)
	for _, job := range []string{"a", "b"} {
		go func() { results <- b.Report(ctx, fsm.ReportAttempt{JobID: job}) }()
	}
	waitFor(t, waitShort, "two batches in flight", func() bool { return f.count() == 2 })
	cctx, cancel := context.WithCancel(ctx)
	go func() { results <- b.Report(cctx, fsm.ReportAttempt{JobID: "abandoned"}) }()
	go func() { results <- b.Report(ctx, fsm.ReportAttempt{JobID: "kept"}) }()
	waitFor(t, waitShort, "two queued", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == 2
	})
	cancel()
	waitFor(t, waitShort, "the abandoned report dropped", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == 1
	})
	f.release <- nil
	waitFor(t, waitShort, "third batch", func() bool { return f.count() == 3 })
	f.release <- nil
	f.release <- nil
	for range 4 {
		<-results
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if third := f.batches[2]; len(third) != 1 || third[0].JobID != "kept" {
		t.Errorf("third batch %+v, want only the kept report", third)
	}
}

// TestBatchingReporterResultBytes: reports carrying big job results are
// split so one batch holds about reportBatchResultBytes of them.
func TestBatchingReporterResultBytes(t *testing.T) {
	f := &fakeBatchSender{release: make(chan error, 100)}
	for range 100 {
		f.release <- nil
	}
	b := NewBatchingReporter(f)
	b.maxInFlight = 1
	big := make([]byte, fsm.ResultMax)
	n := 2 * reportBatchResultBytes / fsm.ResultMax // two batches' worth
	b.mu.Lock()
	b.inFlight = 1 // hold the queue until all are in
	b.mu.Unlock()
	done := make(chan error, n)
	for i := range n {
		go func() { done <- b.Report(context.Background(), fsm.ReportAttempt{JobID: fmt.Sprint(i), Result: big}) }()
	}
	waitFor(t, waitShort, "reports queued", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == n })
	b.mu.Lock()
	b.inFlight = 0
	b.kickLocked()
	b.mu.Unlock()
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, batch := range f.batches {
		size := 0
		for _, r := range batch {
			size += len(r.Result)
		}
		if size > reportBatchResultBytes {
			t.Fatalf("a batch of %d reports carries %d result bytes (cap %d)", len(batch), size, reportBatchResultBytes)
		}
	}
	if len(f.batches) < 2 {
		t.Fatalf("%d batches for %d reports of %d bytes", len(f.batches), n, fsm.ResultMax)
	}
}
