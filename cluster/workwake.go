package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// workWaker wakes the work streams (workstream.go) of the nodes an apply
// touched, and only those: with thousands of clients attached, a
// placement on one node must not wake every stream (the Kubernetes watch
// cache's per-node trigger). It reads the FSM's event ring, where every
// change to a node's live attempts (placed, started, stop_requested, a
// terminal state) is an attempt event naming the node, and so is an
// operator's GPU health reset a node event (node.gpu_reset); when it falls
// behind the ring (or the state is restored) it wakes every stream, which
// costs a re-read each, never a missed change. It also reads this server's
// contact with the leader for every stream, once a second. It runs while at
// least one stream is open.
type workWaker struct {
	ring *fsm.EventRing
	// contact is read once per contactEvery (on the leader it asks raft
	// for its configuration: once per tick, not once per stream or ping).
	contact   func() bool
	inContact atomic.Bool
	// secret reads the cluster-internal secret, kept in secretNow once per
	// tick (a new pointer only when it changed): each stream hands its
	// client the key derived from it (fsm.ClientKey) when it changes.
	secret    func() string
	secretNow atomic.Pointer[string]

	mu      sync.Mutex
	nodes   map[string]*nodeWake
	running bool
	stop    context.CancelFunc
	wakes   uint64 // node wake-ups so far (tests, metrics)
}

// nodeWake is one node's open streams: each one's wake function, called
// (it must not block) when the node's attempts change.
type nodeWake struct {
	streams map[*func()]struct{}
}

// contactEvery is how often the waker reads this server's contact with the
// leader for the streams' frames.
const contactEvery = time.Second

func newWorkWaker(ring *fsm.EventRing, contact func() bool, secret func() string) *workWaker {
	w := &workWaker{ring: ring, contact: contact, secret: secret, nodes: map[string]*nodeWake{}}
	w.readSecret()
	return w
}

// readSecret refreshes secretNow from the state.
func (w *workWaker) readSecret() {
	s := w.secret()
	if cur := w.secretNow.Load(); cur == nil || *cur != s {
		w.secretNow.Store(&s)
	}
}

// internalSecret is the cluster-internal secret as of the last tick (a
// pointer that changes only with the secret).
func (w *workWaker) internalSecret() *string { return w.secretNow.Load() }

// leaderContact is this server's contact with the leader as of the last
// contact tick.
func (w *workWaker) leaderContact() bool { return w.inContact.Load() }

// join registers a stream of node, woken by calling wake, and returns the
// function that removes it. Read the node's state after join: a change
// after the read calls wake.
func (w *workWaker) join(node string, wake func()) (leave func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	nw := w.nodes[node]
	if nw == nil {
		nw = &nodeWake{streams: map[*func()]struct{}{}}
		w.nodes[node] = nw
	}
	key := &wake
	nw.streams[key] = struct{}{}
	if !w.running {
		// From the ring's tail as of now: the caller reads the node's
		// state after join, so every change it could miss is after this.
		pos, _ := w.ring.Tail()
		w.inContact.Store(w.contact())
		w.readSecret()
		ctx, cancel := context.WithCancel(context.Background())
		w.running, w.stop = true, cancel
		go w.run(ctx, pos)
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(nw.streams, key)
		if len(nw.streams) == 0 && w.nodes[node] == nw {
			delete(w.nodes, node)
		}
		if len(w.nodes) == 0 && w.running {
			w.running = false
			w.stop()
		}
	}
}

// WorkWakeups is how many times this node woke one node's work streams
// (a per-node count: one apply that touches one node adds one, whatever
// the number of streams of other nodes).
func (n *Node) WorkWakeups() uint64 { return n.workWaker.wakeups() }

// wakeups is how many node wake-ups there have been.
func (w *workWaker) wakeups() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wakes
}

func (w *workWaker) run(ctx context.Context, pos uint64) {
	touched := map[string]bool{}
	tick := time.NewTicker(contactEvery)
	defer tick.Stop()
	for {
		changed := w.ring.Changed()
		clear(touched)
		next, ok := w.ring.Visit(pos, func(e *fsm.Event) {
			if (e.Type == fsm.EventAttempt || (e.Type == fsm.EventNode && e.Name == fsm.NameGPUReset)) && e.Node != "" {
				touched[e.Node] = true
			}
		})
		if !ok { // events left the ring unread: wake everyone
			next, _ = w.ring.Tail()
		}
		pos = next
		w.wake(touched, !ok)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
			w.inContact.Store(w.contact())
			w.readSecret()
		}
	}
}

// wake wakes the touched nodes' streams (every stream if all): the cost
// is per touched node, not per stream attached.
func (w *workWaker) wake(touched map[string]bool, all bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wake := func(nw *nodeWake) {
		for fn := range nw.streams {
			(*fn)()
		}
		w.wakes++
	}
	if all {
		for _, nw := range w.nodes {
			wake(nw)
		}
		return
	}
	for name := range touched {
		if nw := w.nodes[name]; nw != nil {
			wake(nw)
		}
	}
}
