package exec

import "sync"

// startQueue bounds how many supervisors are starting at once. Starting one
// is the costly part of an attempt (a fork/exec of this binary, the Go
// runtime's start-up, the driver's start); a node handed a thousand
// attempts at once would otherwise start a thousand processes together and
// starve its own raft heartbeats and API. Starts run in submission order;
// each holds its slot until it calls release (once the job started or the
// start failed; release is idempotent).
type startQueue struct {
	mu      sync.Mutex
	limit   int
	active  int
	waiting []func(release func())
}

func newStartQueue(limit int) *startQueue { return &startQueue{limit: max(limit, 1)} }

// submit runs fn in its own goroutine as soon as a slot is free.
func (q *startQueue) submit(fn func(release func())) {
	q.mu.Lock()
	q.waiting = append(q.waiting, fn)
	q.pumpLocked()
	q.mu.Unlock()
}

func (q *startQueue) pumpLocked() {
	for q.active < q.limit && len(q.waiting) > 0 {
		fn := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		q.active++
		var once sync.Once
		release := func() {
			once.Do(func() {
				q.mu.Lock()
				q.active--
				q.pumpLocked()
				q.mu.Unlock()
			})
		}
		go fn(release)
	}
}

// stats returns the starts in progress and the ones waiting.
func (q *startQueue) stats() (active, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active, len(q.waiting)
}
