package groupcommit

import "sync"

// Queue gathers members (one request's share of work each) into groups
// and commits each group with one call of its commit function. Safe for
// concurrent use.
type Queue[M any] struct {
	inFlight int
	maxSize  int
	size     func(M) int
	commit   func(group []M)

	mu      sync.Mutex
	queue   []M
	running int // groups being committed (runner goroutines)
}

// New returns a queue that commits at most inFlight groups at once, each
// of the oldest waiting member and those after it while the sum of their
// size stays within maxSize (a first member larger than that goes alone).
// commit is called from a runner goroutine with a non-empty group in
// arrival order; it must hand every member its outcome before it returns.
func New[M any](inFlight, maxSize int, size func(M) int, commit func(group []M)) *Queue[M] {
	return &Queue[M]{inFlight: inFlight, maxSize: maxSize, size: size, commit: commit}
}

// Add queues members for the next groups and starts a runner if fewer
// than inFlight are committing. It does not wait for their commit.
func (q *Queue[M]) Add(members ...M) {
	q.mu.Lock()
	q.queue = append(q.queue, members...)
	if q.running < q.inFlight {
		q.running++
		go q.run()
	}
	q.mu.Unlock()
}

// Queued is the number of members waiting for a group (tests).
func (q *Queue[M]) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// run commits groups until the queue is empty.
func (q *Queue[M]) run() {
	for {
		q.mu.Lock()
		group := q.takeLocked()
		if len(group) == 0 {
			q.running--
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.commit(group)
	}
}

// takeLocked removes the next group from the queue.
func (q *Queue[M]) takeLocked() []M {
	if len(q.queue) == 0 {
		return nil
	}
	n, size := 1, q.size(q.queue[0])
	for n < len(q.queue) && size+q.size(q.queue[n]) <= q.maxSize {
		size += q.size(q.queue[n])
		n++
	}
	group := q.queue[:n:n]
	if rest := q.queue[n:]; len(rest) == 0 {
		q.queue = nil // let the taken slice go with its group
	} else {
		q.queue = append([]M(nil), rest...)
	}
	return group
}
