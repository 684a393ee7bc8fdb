package httpapi

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// What an event stream costs the node is per wake-up, not per event: a
// goroutine woken, a ring read and one write(2) through loopback or the
// network, whatever the burst holds. Woken by every committed batch, a
// hundred streams cost a quarter of the agent's CPU under a submit load
// (docs/benchmarks.md, "Events"). So the streams are not woken by the
// ring: one goroutine per node (streamWaker) is, and it wakes every stream
// at once, at most once per coalescing delay that grows with the number
// of streams (wakeDelay). An idle node wakes them at once (the first
// event of a quiet period is never held back), and the delay is short for
// a few streams (foreman run follows its job on one): the cost stays about
// the same whatever the number of streams, the latency grows with it.
//
// At each wake-up the waker also reads what was appended since the last
// one and concatenates the frames (burst): a stream that wants every
// event (no filter) and is at the burst's start writes those shared bytes
// as they are, with no read and no copy of its own.
//
// The guarantees are the ring's: a stream reads from its own position, so
// a later wake-up delivers everything a skipped one would have; nothing
// here can block Apply (the ring's append only closes a channel).

// wakeDelay is the least time between two wake-ups with n streams open:
// perStream for each, at most max.
func wakeDelay(n int, perStream, max time.Duration) time.Duration {
	return min(time.Duration(n)*perStream, max)
}

// streamWaker wakes the event streams of one node.
type streamWaker struct {
	perStream, max time.Duration
	wakeups        atomic.Int64 // foreman_event_stream_wakeups_total
	// ownReads counts the wake-ups at which an unfiltered stream read the
	// ring itself instead of writing the shared burst (catching up).
	ownReads atomic.Int64

	mu      sync.Mutex
	n       int           // open streams
	nAll    int           // of them, with no filter
	ch      chan struct{} // closed at the next wake-up
	burst   *sharedBurst  // read at the last wake-up
	stop    chan struct{} // closed when the last stream leaves
	running bool
}

// join registers a stream of ring and returns the function that removes
// it. The waker runs while at least one stream is open.
func (w *streamWaker) join(ring *fsm.EventRing, all bool) (leave func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if all {
		w.nAll++
	}
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	if !w.running {
		w.running = true
		w.stop = make(chan struct{})
		// The ring's channel is taken now, before the stream's first
		// read: an append after that read wakes it.
		go w.run(ring, ring.Changed(), w.stop)
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.n--
		if all {
			w.nAll--
		}
		if w.n == 0 && w.running {
			w.running = false
			close(w.stop)
		}
	}
}

// sharedBurst is every event at ring positions [from, to), as SSE frames.
// Shared by the streams: never modify it.
type sharedBurst struct {
	from, to uint64
	frames   []byte
	offs     []int // offs[i]: where the frame of the event at from+i starts
}

// framesFrom is the part of the burst from ring position pos on
// (from <= pos <= to): a stream that joined between two wake-ups writes
// only what it has not seen.
func (b *sharedBurst) framesFrom(pos uint64) []byte {
	if pos >= b.to {
		return nil
	}
	return b.frames[b.offs[pos-b.from]:]
}

// C returns a channel closed at the next wake-up, and the burst read at
// the last one (nil if none). A stream takes them before reading the
// ring: an event appended after that read wakes it.
func (w *streamWaker) C() (<-chan struct{}, *sharedBurst) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch, w.burst
}

func (w *streamWaker) run(ring *fsm.EventRing, changed <-chan struct{}, stop <-chan struct{}) {
	pos, _ := ring.Tail()
	buf := make([]fsm.RingEvent, 0, 256)
	size := 0 // the last burst's, to size the next
	var last time.Time
	var timer *time.Timer
	for {
		select {
		case <-stop:
			return
		case <-changed:
		}
		w.mu.Lock()
		delay := wakeDelay(w.n, w.perStream, w.max)
		w.mu.Unlock()
		if wait := delay - time.Since(last); !last.IsZero() && wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-stop:
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		// Take the ring's next channel before waking the streams: an
		// append after their reads closes it and wakes them again.
		changed = ring.Changed()
		last = time.Now()
		w.mu.Lock()
		all := w.nAll > 0
		w.mu.Unlock()
		var burst *sharedBurst
		if all {
			burst, pos = readBurst(ring, pos, buf, size)
			if burst != nil {
				size = len(burst.frames)
			}
		} else {
			pos, _ = ring.Tail()
		}
		w.mu.Lock()
		w.burst = burst
		w.wakeups.Add(1)
		close(w.ch)
		w.ch = make(chan struct{})
		w.mu.Unlock()
	}
}

// readBurst reads the ring from pos on (up to maxBurst bytes of frames),
// into a burst first sized for sizeHint bytes. A nil burst: pos left the
// ring; the next one starts at the tail.
func readBurst(ring *fsm.EventRing, pos uint64, buf []fsm.RingEvent, sizeHint int) (*sharedBurst, uint64) {
	b := &sharedBurst{from: pos, frames: make([]byte, 0, min(sizeHint+sizeHint/4, maxBurst+maxBurst/4))}
	for len(b.frames) < maxBurst {
		evs, next, ok := ring.Read(pos, buf)
		if !ok {
			tail, _ := ring.Tail()
			return nil, tail
		}
		pos = next
		for i := range evs {
			b.offs = append(b.offs, len(b.frames))
			b.frames = append(b.frames, evs[i].Frame...)
		}
		more := len(evs) == cap(buf)
		clear(evs)
		if !more {
			break
		}
	}
	b.to = pos
	return b, pos
}
