package sched

import (
	"container/heap"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/foreman-sched/foreman/fsm"
)

// The cron loop fires schedules on the leader. It keeps every schedule's
// next tick in a heap and one timer for the earliest, so 10,000 schedules
// cost nothing between ticks: no polling, no scan. It keeps nothing that
// must survive a failover: a new leader reads every schedule (the cursor
// says what was decided) and rebuilds the heap. Changes reach it as
// fsm schedule events (its own fires included), after which it re-reads
// just the schedules named; a lagged subscription rebuilds everything.

// cronMaxSleep caps the timer. The timer measures real time while ticks
// are wall-clock times: after the wall clock is stepped back (NTP, an
// operator) a timer set for the next tick would ring late by the step.
// Waking at least this often bounds that to cronMaxSleep, for one heap
// peek per wake.
const cronMaxSleep = 5 * time.Second

// cronEventBuffer is the subscription's buffer; overflowing it costs a
// rebuild, not a lost change.
const cronEventBuffer = 1 << 14

type cronEntry struct {
	rec  *fsm.Schedule
	cron *fsm.Cron
	next time.Time
	pos  int // in the heap, or -1
}

// cronHeap orders entries by next tick (then name, so ties are stable).
type cronHeap []*cronEntry

func (h cronHeap) Len() int { return len(h) }
func (h cronHeap) Less(i, j int) bool {
	if !h[i].next.Equal(h[j].next) {
		return h[i].next.Before(h[j].next)
	}
	return h[i].rec.Spec.Name < h[j].rec.Spec.Name
}
func (h cronHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].pos = i; h[j].pos = j }
func (h *cronHeap) Push(x any)   { e := x.(*cronEntry); e.pos = len(*h); *h = append(*h, e) }
func (h *cronHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h, e.pos = old[:len(old)-1], -1
	return e
}

type cronLoop struct {
	s       *Scheduler
	entries map[string]*cronEntry
	heap    cronHeap
	ids     *ulid.MonotonicEntropy

	sub   *fsm.Subscription
	dirty map[string]bool // schedules to re-read
	stale bool            // re-read everything
}

func newCronLoop(s *Scheduler) *cronLoop {
	return &cronLoop{s: s, entries: map[string]*cronEntry{}, ids: ulid.Monotonic(rand.Reader, 0),
		dirty: map[string]bool{}, stale: true}
}

// set puts (or replaces, or with rec nil removes) a schedule's entry. A
// spec that no longer parses here (another node's tz database knew its
// zone) is logged and left out.
func (l *cronLoop) set(name string, rec *fsm.Schedule) {
	e := l.entries[name]
	if rec == nil {
		if e != nil {
			if e.pos >= 0 {
				heap.Remove(&l.heap, e.pos)
			}
			delete(l.entries, name)
		}
		return
	}
	if e == nil || e.rec.Spec.Cron != rec.Spec.Cron || e.rec.Spec.TimeZone != rec.Spec.TimeZone {
		c, err := fsm.ParseCron(rec.Spec.Cron, rec.Spec.TimeZone)
		if err != nil {
			l.s.log.Warn("schedule cannot be parsed on this node; not firing it", "schedule", name, "err", err)
			l.set(name, nil)
			return
		}
		if e == nil {
			e = &cronEntry{pos: -1}
			l.entries[name] = e
		}
		e.cron = c
	}
	e.rec = rec
	e.next = nextTick(rec, e.cron, rec.DecidedThrough())
	switch {
	case e.next.IsZero() && e.pos >= 0:
		heap.Remove(&l.heap, e.pos)
	case e.next.IsZero():
	case e.pos >= 0:
		heap.Fix(&l.heap, e.pos)
	default:
		heap.Push(&l.heap, e)
	}
}

// rebuild reads every schedule (keeping the parsed specs of unchanged
// ones: a burst of fires can overflow the subscription, and re-parsing
// 10,000 specs each time would cost more than the fires).
func (l *cronLoop) rebuild() error {
	var recs []*fsm.Schedule
	if err := l.s.state.View(func(tx *fsm.Tx) error {
		return tx.ForEachSchedule(func(s *fsm.Schedule) bool { recs = append(recs, s); return true })
	}); err != nil {
		return err
	}
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		seen[r.Spec.Name] = true
		l.set(r.Spec.Name, r)
	}
	for name := range l.entries {
		if !seen[name] {
			l.set(name, nil)
		}
	}
	return nil
}

// reread reads the named schedules again; it returns the applied index
// it read at.
func (l *cronLoop) reread(names map[string]bool) (uint64, error) {
	recs := make(map[string]*fsm.Schedule, len(names))
	var index uint64
	if err := l.s.state.View(func(tx *fsm.Tx) error {
		index = tx.AppliedIndex()
		for n := range names {
			r, err := tx.Schedule(n)
			if err != nil && !fsmNotFound(err) {
				return err
			}
			recs[n] = r
		}
		return nil
	}); err != nil {
		return 0, err
	}
	for n, r := range recs {
		l.set(n, r)
	}
	return index, nil
}

// run fires schedules until ctx ends. It starts after the scheduler's
// barrier, so it reads everything earlier leaders committed.
func (l *cronLoop) run(ctx context.Context) {
	es, ok := l.s.state.(eventSource)
	if !ok {
		l.s.log.Warn("state has no events; schedules do not fire")
		return
	}
	l.sub = es.Subscribe(cronEventBuffer)
	defer l.sub.Close()
	for ctx.Err() == nil {
		err := l.refresh()
		if err == nil {
			err = l.fireDue(ctx)
		}
		if err == nil {
			// A burst of fires can overflow the subscription: rebuild now,
			// not when the next tick wakes the loop (that made it late).
			err = l.refresh()
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.s.log.Warn("firing schedules failed; retrying", "err", err)
			l.stale = true
			if !l.s.sleep(ctx, l.s.cfg.RetryDelay) {
				return
			}
			continue
		}
		var wake <-chan time.Time
		var timer Timer
		if len(l.heap) > 0 {
			timer = l.s.clk.NewTimer(min(l.heap[0].next.Sub(l.s.clk.Now()), cronMaxSleep))
			wake = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case ev, ok := <-l.sub.C():
			if !ok {
				return
			}
			l.note(ev)
			l.drainEvents(nil, 0)
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// refresh re-reads what the events said changed.
func (l *cronLoop) refresh() error {
	var err error
	switch {
	case l.stale || l.sub.Lagged():
		err = l.rebuild()
	case len(l.dirty) > 0:
		_, err = l.reread(l.dirty)
	}
	if err == nil {
		l.stale = false
		clear(l.dirty)
	}
	return err
}

func (l *cronLoop) note(ev fsm.Event) {
	switch ev.Type {
	case fsm.EventSchedule:
		l.dirty[ev.Schedule] = true
	case fsm.EventReset:
		l.stale = true
	}
}

// drainEvents notes the queued events, except schedule events for the
// names in fresh at or below index (re-read after they were applied).
func (l *cronLoop) drainEvents(fresh map[string]bool, index uint64) {
	for {
		select {
		case ev, ok := <-l.sub.C():
			if !ok {
				return
			}
			if ev.Type == fsm.EventSchedule && fresh[ev.Schedule] && ev.Index <= index {
				continue
			}
			l.note(ev)
		default:
			return
		}
	}
}

// fireDue commits the fires of every schedule whose next tick has come.
// Each schedule's fires stay in one command (in tick order); commands of
// up to BatchSize fires are committed concurrently, so raft carries a
// burst of simultaneous ticks in few entries. An entry stays in the heap
// at its old tick until its own fire event re-reads it.
func (l *cronLoop) fireDue(ctx context.Context) error {
	now := l.s.clk.Now()
	due := l.due(now)
	if len(due) == 0 {
		return nil
	}
	var batches [][]fsm.Fire
	var cur []fsm.Fire
	names := make(map[string]bool, len(due))
	for _, e := range due {
		names[e.rec.Spec.Name] = true
		fires, _ := DueFires(e.rec, e.cron, now, l.s.cfg.CronGrace)
		for i := range fires {
			if fires[i].Skip == "" {
				fires[i].JobID = ulid.MustNew(ulid.Timestamp(now), l.ids).String()
			}
		}
		if len(cur) > 0 && len(cur)+len(fires) > l.s.cfg.BatchSize {
			batches, cur = append(batches, cur), nil
		}
		cur = append(cur, fires...)
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	if len(batches) == 0 {
		return nil
	}
	// Fires of different schedules commute: the order of due is free.
	l.s.cronFires.Add(int64(len(batches))) // before: a test seeing the jobs sees the count
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := mustCommand(fsm.CmdFireSchedules, now, &fsm.FireSchedules{Fires: b})
			res, err := l.s.raft.Apply(ctx, cmd)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("apply fires: %w", err)
			case res != nil && res.Err != nil:
				errs[i] = fmt.Errorf("fires refused: %w", res.Err)
			case res != nil && len(res.Skipped) > 0:
				l.s.log.Debug("fires refused by apply", "count", len(res.Skipped))
			}
			if errs[i] == nil {
				observeFires(b, l.s.clk.Now())
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	// Read the fired schedules back (their new cursors) before the next
	// wake. One whose fire Apply refused without moving its cursor would
	// be due again at once: it waits RetryDelay instead of spinning.
	index, err := l.reread(names)
	if err != nil {
		return err
	}
	// Their fire events are queued by now (Apply returns after the local
	// FSM published them) and say nothing the re-read did not see.
	l.drainEvents(names, index)
	for n := range names {
		if e := l.entries[n]; e != nil && e.pos >= 0 && !e.next.After(now) {
			l.s.log.Warn("schedule still due after its fire; retrying later", "schedule", n, "tick", e.next)
			e.next = now.Add(l.s.cfg.RetryDelay)
			heap.Fix(&l.heap, e.pos)
		}
	}
	return nil
}

// due lists the entries whose next tick is at or before now, reading only
// those (and their children) in the heap: a wake costs what is due.
func (l *cronLoop) due(now time.Time) []*cronEntry {
	var out []*cronEntry
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(l.heap) || l.heap[i].next.After(now) {
			continue
		}
		out = append(out, l.heap[i])
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return out
}

func fsmNotFound(err error) bool { return errors.Is(err, fsm.ErrNotFound) }
