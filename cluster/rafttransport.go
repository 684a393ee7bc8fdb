package cluster

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// raftTransport is raft's network transport with its heartbeat fast path
// narrowed to the one case where it is safe (hashicorp/raft#695, open).
//
// The transport hands a heartbeat (an AppendEntries with no entries) to raft
// on its own I/O goroutine, so that a follower's election timer does not
// wait behind disk writes in raft's main loop. But a heartbeat that carries
// a newer term also makes the node a follower of that term, and on that
// goroutine it races the main loop: a deposed leader that was just taking
// an Apply reads the new term and appends the entry with it, at an index
// where the new leader has a different entry of the same term. Log matching
// no longer holds: the two logs pass raft's consistency check, and the
// state machines diverge for good. Jepsen's pause nemeses hit it: a leader
// resumed after SIGSTOP found its successor's heartbeats queued on its
// socket, and wrote a report with the successor's term at the index of the
// successor's no-op.
//
// So only a heartbeat to a follower of the heartbeat's own term takes the
// fast path; anything else (a newer or older term, a leader, a candidate)
// goes through raft's main loop, as a transport without the fast path does.
// That check and the handler are not atomic, but whatever the main loop
// does between them raises the term (an election), and the handler then
// ignores the older heartbeat.
type raftTransport struct {
	*raft.NetworkTransport
	raft    atomic.Pointer[raftRole] // set once raft exists; nil: nothing takes the fast path
	consume chan raft.RPC            // what raft's main loop reads
	done    chan struct{}
	once    sync.Once
}

// raftRole is what the fast path's check reads of raft (*raft.Raft).
type raftRole interface {
	State() raft.RaftState
	CurrentTerm() uint64
}

func newRaftTransport(inner *raft.NetworkTransport) *raftTransport {
	t := &raftTransport{NetworkTransport: inner, consume: make(chan raft.RPC), done: make(chan struct{})}
	go t.forward()
	return t
}

// forward passes the transport's RPCs on to raft's main loop.
func (t *raftTransport) forward() {
	in := t.NetworkTransport.Consumer()
	for {
		select {
		case <-t.done:
			return
		case rpc := <-in:
			select {
			case t.consume <- rpc:
			case <-t.done:
				return
			}
		}
	}
}

// Consumer implements raft.Transport.
func (t *raftTransport) Consumer() <-chan raft.RPC { return t.consume }

// SetHeartbeatHandler implements raft.Transport: cb runs on the I/O
// goroutine only for a heartbeat that cannot change the node's term or role.
func (t *raftTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if t.fastPathSafe(rpc) {
			cb(rpc)
			return
		}
		select {
		case t.consume <- rpc:
		case <-t.done:
			rpc.Respond(nil, raft.ErrTransportShutdown)
		}
	})
}

// fastPathSafe: the node is a follower in the heartbeat's term.
func (t *raftTransport) fastPathSafe(rpc raft.RPC) bool {
	r := t.raft.Load()
	req, ok := rpc.Command.(*raft.AppendEntriesRequest)
	if r == nil || !ok {
		return false
	}
	return (*r).State() == raft.Follower && req.Term == (*r).CurrentTerm()
}

// setRaft arms the fast path's check with r.
func (t *raftTransport) setRaft(r raftRole) { t.raft.Store(&r) }

// Close implements raft.WithClose.
func (t *raftTransport) Close() error {
	t.once.Do(func() { close(t.done) })
	return t.NetworkTransport.Close()
}
