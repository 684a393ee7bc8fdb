package fsm

import (
	"sync"
	"sync/atomic"
)

// Subscription receives typed events. A subscriber that falls behind loses
// events rather than slowing Apply; Lagged tells it to re-read the state.
type Subscription struct {
	ch     chan Event
	lagged atomic.Bool
	n      *notifier
	once   sync.Once
}

// C is closed when the subscription or the FSM is closed.
func (s *Subscription) C() <-chan Event { return s.ch }

// Lagged reports (and clears) whether events were dropped since the last call.
func (s *Subscription) Lagged() bool { return s.lagged.Swap(false) }

// Close stops delivery and closes C.
func (s *Subscription) Close() {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if _, ok := s.n.subs[s]; ok {
		delete(s.n.subs, s)
		close(s.ch)
	}
}

// notifier fans out "something was applied" signals and events.
type notifier struct {
	mu       sync.Mutex
	watchers map[chan struct{}]struct{}
	subs     map[*Subscription]struct{}
	closed   bool
}

func (n *notifier) init() {
	n.watchers = map[chan struct{}]struct{}{}
	n.subs = map[*Subscription]struct{}{}
}

// Watch returns a channel that receives (coalesced) after every committed
// batch, and a function that stops the watch. Readers re-read state with
// View when woken; a wake-up may cover many entries.
func (f *FSM) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n := &f.notify
	n.mu.Lock()
	if n.closed {
		close(ch)
	} else {
		n.watchers[ch] = struct{}{}
	}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.watchers, ch)
		n.mu.Unlock()
	}
}

// Subscribe returns a subscription with a buffer of buf events (min 1).
func (f *FSM) Subscribe(buf int) *Subscription {
	if buf < 1 {
		buf = 1
	}
	s := &Subscription{ch: make(chan Event, buf), n: &f.notify}
	n := &f.notify
	n.mu.Lock()
	if n.closed {
		close(s.ch)
	} else {
		n.subs[s] = struct{}{}
	}
	n.mu.Unlock()
	return s
}

// publish never blocks: Apply must not wait for readers.
func (n *notifier) publish(events []Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	if len(events) == 0 {
		return
	}
	for s := range n.subs {
		for _, e := range events {
			select {
			case s.ch <- e:
			default:
				s.lagged.Store(true)
			}
		}
	}
}

func (n *notifier) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	for ch := range n.watchers {
		close(ch)
		delete(n.watchers, ch)
	}
	for s := range n.subs {
		close(s.ch)
		delete(n.subs, s)
	}
}
