package cluster

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// role is a raft role and term for the fast path's check.
type role struct {
	state raft.RaftState
	term  uint64
}

func (r role) State() raft.RaftState { return r.state }
func (r role) CurrentTerm() uint64   { return r.term }

// TestRaftTransportHeartbeatFastPath: a heartbeat reaches raft's handler on
// the I/O goroutine only when the node is a follower of the heartbeat's
// term; any other heartbeat (the one that made a resumed leader append an
// entry with its successor's term, hashicorp/raft#695) goes to raft's main
// loop, and so do the RPCs that are not heartbeats.
func TestRaftTransportHeartbeatFastPath(t *testing.T) {
	inner, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	tr := newRaftTransport(inner)
	defer tr.Close()
	fast := make(chan struct{}, 1)
	tr.SetHeartbeatHandler(func(rpc raft.RPC) {
		fast <- struct{}{}
		rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
	})
	client, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	// send sends an AppendEntries of term and says which path took it.
	send := func(term uint64, entries []*raft.Log) string {
		t.Helper()
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("10.0.0.9:7071"), ID: []byte("n9")}, Term: term, Entries: entries}
		if len(entries) > 0 {
			req.PrevLogEntry, req.PrevLogTerm = 1, term
		}
		errc := make(chan error, 1)
		go func() {
			var resp raft.AppendEntriesResponse
			errc <- client.AppendEntries("n0", inner.LocalAddr(), req, &resp)
		}()
		var path string
		select {
		case <-fast:
			path = "fast"
		case rpc := <-tr.Consumer():
			path = "main loop"
			rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
		case <-time.After(10 * time.Second):
			t.Fatal("the RPC reached neither path")
		}
		if err := <-errc; err != nil {
			t.Fatalf("term %d: %v", term, err)
		}
		return path
	}

	if got := send(3, nil); got != "main loop" {
		t.Fatalf("before raft exists a heartbeat took the %s path", got)
	}
	for _, c := range []struct {
		name string
		role role
		term uint64
		want string
	}{
		{"follower, same term", role{raft.Follower, 3}, 3, "fast"},
		{"follower, newer term", role{raft.Follower, 2}, 3, "main loop"},
		{"follower, older term", role{raft.Follower, 4}, 3, "main loop"},
		{"leader resumed, its successor's heartbeat", role{raft.Leader, 2}, 3, "main loop"},
		{"leader, same term", role{raft.Leader, 3}, 3, "main loop"},
		{"candidate", role{raft.Candidate, 3}, 3, "main loop"},
	} {
		tr.setRaft(c.role)
		if got := send(c.term, nil); got != c.want {
			t.Errorf("%s: the heartbeat took the %s path, want %s", c.name, got, c.want)
		}
	}
	tr.setRaft(role{raft.Follower, 3})
	if got := send(3, []*raft.Log{{Index: 2, Term: 3, Type: raft.LogNoop}}); got != "main loop" {
		t.Errorf("an AppendEntries with entries took the %s path", got)
	}
}
