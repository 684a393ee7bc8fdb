package exec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestStartQueueBoundsAndOrder: never more than limit starts at once, and
// start i begins only after i-limit+1 slots were released (with limit 1:
// exactly submission order).
func TestStartQueueBoundsAndOrder(t *testing.T) {
	for _, limit := range []int{1, 3} {
		t.Run(fmt.Sprint("limit=", limit), func(t *testing.T) {
			const n = 20
			q := newStartQueue(limit)
			var mu sync.Mutex
			var order []int
			released := map[int]bool{}
			active, peak := 0, 0
			gates := make([]chan struct{}, n)
			for i := range gates {
				gates[i] = make(chan struct{})
			}
			done := make(chan struct{}, n)
			for i := range n {
				q.submit(func(release func()) {
					mu.Lock()
					// FIFO: start i is dispatched only once i-limit+1 slots were freed.
					if len(released) < i-limit+1 {
						t.Errorf("start %d began after only %d releases", i, len(released))
					}
					order = append(order, i)
					active++
					peak = max(peak, active)
					mu.Unlock()
					<-gates[i]
					mu.Lock()
					active--
					released[i] = true
					mu.Unlock()
					release()
					release() // idempotent
					done <- struct{}{}
				})
			}
			for k := range n {
				waitFor(t, waitShort, "a start to begin", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(order) > k
				})
				mu.Lock()
				next := order[k]
				mu.Unlock()
				close(gates[next])
			}
			for range n {
				<-done
			}
			if peak > limit {
				t.Errorf("peak concurrent starts %d > limit %d", peak, limit)
			}
			if limit == 1 {
				for i, v := range order {
					if v != i {
						t.Fatalf("start order %v, want submission order", order)
					}
				}
			}
			if a, w := q.stats(); a != 0 || w != 0 {
				t.Errorf("after all: active %d waiting %d", a, w)
			}
		})
	}
}

// TestQueuedStartWaitsForContact: an attempt that waited in the start queue
// while the node lost contact with the leader is not started until contact
// (and sync) is back; a start delayed past a partition could outlive the
// leader's wait before it places the job elsewhere.
func TestQueuedStartWaitsForContact(t *testing.T) {
	cfg := testConfig(t, dataDir(t))
	cfg.MaxConcurrentStarts = 1
	hold := make(chan struct{})
	var once sync.Once
	afterSupervisorStart = func(dir string) {
		if filepath.Base(dir) == TaskID("first", 1) {
			once.Do(func() { <-hold })
		}
	}
	t.Cleanup(func() { afterSupervisorStart = func(string) {} })
	state := newFakeState()
	h := startWorker(t, state, cfg)
	state.assign("first", fsm.JobSpec{Command: []string{"true"}})
	waitFor(t, waitShort, "first start to hold the slot", func() bool {
		a, _ := h.w.starts.stats()
		return a == 1
	})
	state.assign("queued", fsm.JobSpec{Command: []string{"true"}})
	waitFor(t, waitShort, "second attempt queued", func() bool {
		_, w := h.w.starts.stats()
		return w == 1
	})
	state.contact.Store(false)
	close(hold)
	h.waitFinal(t, "first", waitLong)
	waitFor(t, waitShort, "queue drained", func() bool {
		a, w := h.w.starts.stats()
		return a == 0 && w == 0
	})
	if _, err := os.Stat(h.dir("queued")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("queued attempt started while out of contact (dir: %v)", err)
	}
	if state.running("queued") {
		t.Fatal("queued attempt reported running while out of contact")
	}
	state.contact.Store(true)
	if r := h.waitFinal(t, "queued", waitLong); r.State != fsm.AttemptSucceeded {
		t.Fatalf("queued attempt after contact: %s %s", r.State, r.Reason)
	}
}
