package sched

import (
	"github.com/foreman-sched/foreman/fsm"
)

// Freed room jumps the coalescing window. The window (coalesceFactor × the
// last plan's cost) keeps a storm of changes to a plan per window, but a
// change that frees room while jobs wait for it is the one a full cluster
// waits on: with every node busy, each finish is a hand-off (the next job
// starts only once it is placed), and the window added up to 5× a plan's
// cost to it — under load, with a plan taking a few milliseconds, the
// whole 20 ms cap. So when the last plan left runnable jobs unplaced and an
// attempt has ended since (or a node changed), the loop plans at once —
// but not twice in a row: a plan started that way is followed by a normal
// window, which keeps a storm of finishes over a backlog to at most two
// plans per window.

// eventSource is what State may also offer (*fsm.FSM does): typed events,
// which tell a change that freed room from the rest.
type eventSource interface {
	Subscribe(buf int) *fsm.Subscription
}

// roomEventBuffer is the subscription's buffer; when it overflows the
// watch assumes room was freed (it cannot tell what it missed).
const roomEventBuffer = 256

// roomWatch reports attempts ending and nodes changing. Only the loop's
// goroutine uses it.
type roomWatch struct {
	sub *fsm.Subscription // nil: State has no events; never jumps
}

func newRoomWatch(st State) *roomWatch {
	es, ok := st.(eventSource)
	if !ok {
		return &roomWatch{}
	}
	return &roomWatch{sub: es.Subscribe(roomEventBuffer)}
}

func (r *roomWatch) close() {
	if r.sub != nil {
		r.sub.Close()
	}
}

// reset forgets the events so far: the plan about to start sees them.
func (r *roomWatch) reset() { r.freedSince() }

// freedSince drains the queued events and reports whether any freed room.
func (r *roomWatch) freedSince() bool {
	if r.sub == nil {
		return false
	}
	freed := r.sub.Lagged()
	for {
		select {
		case ev, ok := <-r.sub.C():
			if !ok {
				r.sub = nil
				return freed
			}
			freed = freed || freesRoom(ev)
		default:
			return freed
		}
	}
}

// freesRoom reports whether ev may let a waiting job fit: an attempt that
// ended, or a node that appeared or changed.
func freesRoom(ev fsm.Event) bool {
	switch ev.Type {
	case fsm.EventAttempt:
		return ev.State != "" && !fsm.AttemptState(ev.State).Live()
	case fsm.EventNode, fsm.EventReset:
		return true
	}
	return false
}
