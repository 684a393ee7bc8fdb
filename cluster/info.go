package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Leader returns the current leader's name and HTTP address ("" if none is
// known).
func (n *Node) Leader() (name, httpAddr string) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return "", ""
	}
	return string(id), n.leaderHTTP()
}

// Barrier waits until every entry committed before the call is applied to
// this node's FSM. Leader only.
func (n *Node) Barrier(ctx context.Context) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	return raftErr(waitFuture(ctx, n.raft.Barrier(timeoutOf(ctx, n.cfg.ForwardTimeout))))
}

// ConsistentRead makes a following local read linearizable: it confirms
// this node is still the leader (a quorum answers) and waits until the FSM
// has applied everything committed so far. Leader only; ErrNotLeader
// elsewhere.
func (n *Node) ConsistentRead(ctx context.Context) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if err := waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
		return raftErr(err)
	}
	return n.Barrier(ctx)
}

func raftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrShutdown, err)
	}
	return err
}

func timeoutOf(ctx context.Context, def time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return def
}

// Members is this node's gossip view, sorted by name. Dead members stay
// listed after memberlist forgets them.
func (n *Node) Members() []Member { return n.members.list() }

// RaftServer is one server of the raft configuration.
type RaftServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"` // voter, nonvoter, staging
	Role     string `json:"role"`     // leader or follower
	// AppliedIndex is known only for this node (0 elsewhere).
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	// LastHeardAgo is, on the leader, how long since the server last answered.
	LastHeardAgo string `json:"last_heard_ago,omitempty"`
	// Clients is, on the leader, how many clients hold their work stream
	// on this server (as their newest relayed beats say; nil elsewhere).
	Clients *int `json:"clients,omitempty"`
}

// RaftInfo is a snapshot of this node's raft state.
type RaftInfo struct {
	Node         string `json:"node"`
	State        string `json:"state"` // Leader, Follower, Candidate, Shutdown
	Leader       string `json:"leader"`
	Term         uint64 `json:"term"`
	FirstIndex   uint64 `json:"first_index"` // the oldest entry still in the log
	LastIndex    uint64 `json:"last_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"` // the FSM's
	LastContact  string `json:"last_contact,omitempty"`
	// SnapshotIndex is the newest snapshot's last index (0: none yet).
	SnapshotIndex uint64       `json:"snapshot_index"`
	Servers       []RaftServer `json:"servers"`
}

// RaftInfo reports the configuration and this node's indexes.
func (n *Node) RaftInfo() RaftInfo {
	_, leader := n.raft.LeaderWithID()
	info := RaftInfo{
		Node: n.cfg.Name, State: n.raft.State().String(), Leader: string(leader), Term: n.raft.CurrentTerm(),
		LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.fsm.AppliedIndex(),
	}
	info.FirstIndex, _ = n.storage.logs.FirstIndex()
	info.SnapshotIndex = n.lastSnapshotIndex()
	if lc := n.raft.LastContact(); !lc.IsZero() && !n.IsLeader() {
		info.LastContact = time.Since(lc).Round(time.Millisecond).String()
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return info
	}
	isLeader := n.IsLeader()
	var streams map[string]int
	if isLeader {
		streams = n.clientsHeard.byServer(time.Now(), n.cfg.Clients.DeadAfter)
	}
	for _, s := range f.Configuration().Servers {
		rs := RaftServer{ID: string(s.ID), Address: string(s.Address), Suffrage: suffrage(s.Suffrage), Role: "follower"}
		if s.ID == leader {
			rs.Role = "leader"
		}
		if string(s.ID) == n.cfg.Name {
			rs.AppliedIndex = info.AppliedIndex
		} else if isLeader {
			if t, ok := n.heard.get(string(s.Address)); ok {
				rs.LastHeardAgo = time.Since(t).Round(time.Millisecond).String()
			}
		}
		if isLeader {
			c := streams[string(s.ID)]
			rs.Clients = &c
		}
		info.Servers = append(info.Servers, rs)
	}
	return info
}

func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return "voter"
	case raft.Nonvoter:
		return "nonvoter"
	default:
		return "staging"
	}
}

// Ready reports whether this node can serve up-to-date local reads: a
// leader is known, the leader has been heard from recently (or this node is
// it), and the FSM has applied everything this node knows to be committed.
func (n *Node) Ready() error {
	select {
	case <-n.closing:
		return ErrShutdown
	default:
	}
	if _, id := n.raft.LeaderWithID(); id == "" {
		return fmt.Errorf("%w: %w", ErrNotReady, ErrNoLeader)
	}
	if !n.InContactWithLeader() {
		return fmt.Errorf("%w: no recent contact with the leader", ErrNotReady)
	}
	// In sync: applied the leader's log as of (re)gaining contact. raft's
	// commit index below is only what this node has heard of so far, so a
	// follower replaying a long log looks caught up between batches.
	if !n.InSync() {
		return fmt.Errorf("%w: not yet caught up with the leader's log", ErrNotReady)
	}
	// raft's applied index, not the FSM's: configuration and no-op entries
	// never reach the FSM.
	if applied, commit := n.raft.AppliedIndex(), n.raft.CommitIndex(); applied < commit {
		return fmt.Errorf("%w: applied index %d is behind commit index %d", ErrNotReady, applied, commit)
	}
	return nil
}
