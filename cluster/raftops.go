package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Raft operator requests (foreman cluster raft remove-peer and
// transfer-leadership). Both run on the leader, which alone knows which
// voters answer: a voter is healthy when it is the leader or answered the
// leader within LeaderContactTimeout. Both refuse what would leave the
// cluster without a healthy majority of voters.

// serverHealth is one server of the configuration as the leader sees it.
type serverHealth struct {
	raft.Server
	healthy bool
}

func (n *Node) serverHealth() ([]serverHealth, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, raftErr(err)
	}
	var out []serverHealth
	for _, s := range f.Configuration().Servers {
		h := serverHealth{Server: s}
		if string(s.ID) == n.cfg.Name {
			h.healthy = true
		} else if t, ok := n.heard.get(string(s.Address)); ok && time.Since(t) < n.cfg.LeaderContactTimeout {
			h.healthy = true
		}
		out = append(out, h)
	}
	return out, nil
}

// findServer matches a server by ID (the node name) or raft address.
func findServer(servers []serverHealth, name string) (serverHealth, bool) {
	for _, s := range servers {
		if string(s.ID) == name || string(s.Address) == name {
			return s, true
		}
	}
	return serverHealth{}, false
}

func serverIDs(servers []serverHealth) string {
	var ids []string
	for _, s := range servers {
		ids = append(ids, string(s.ID))
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}

// RemovePeer removes a server (by name or raft address) from the raft
// configuration. Leader only. Refused (ErrRefused) when the server is the
// leader itself, the last voter, or a voter whose removal would leave the
// remaining voters without a healthy majority. A server that is still
// alive in gossip is not re-added for a while (as after a leave), but an
// agent that keeps running comes back: stop it first.
func (n *Node) RemovePeer(ctx context.Context, name string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	servers, err := n.serverHealth()
	if err != nil {
		return err
	}
	target, ok := findServer(servers, name)
	if !ok {
		return fmt.Errorf("%w: %q (servers: %s)", ErrUnknownServer, name, serverIDs(servers))
	}
	id := string(target.ID)
	voters, healthy := 0, 0 // the voters that would remain
	for _, s := range servers {
		if s.Suffrage == raft.Voter && s.ID != target.ID {
			voters++
			if s.healthy {
				healthy++
			}
		}
	}
	if id == n.cfg.Name {
		if voters == 0 {
			return fmt.Errorf("%w: %s is the last voter; removing it would leave no cluster", ErrRefused, id)
		}
		return fmt.Errorf("%w: %s is the leader; transfer leadership first (foreman cluster raft transfer-leadership), then remove it", ErrRefused, id)
	}
	if target.Suffrage == raft.Voter {
		if healthy <= voters/2 {
			return fmt.Errorf("%w: removing voter %s would leave %d voters of which only %d answer the leader: no quorum", ErrRefused, id, voters, healthy)
		}
	}
	n.markLeaving(id)
	f := n.raft.RemoveServer(target.ID, 0, timeoutOf(ctx, n.cfg.ForwardTimeout))
	if err := waitFuture(ctx, f); err != nil {
		return raftErr(err)
	}
	n.logger.Warn("removed server from raft on operator request", "server", id)
	n.members.signal() // promote a non-voter if the voters are now short
	return nil
}

// TransferLeadership hands leadership to the voter named to (by name or
// raft address), or with to == "" to a healthy voter of raft's choosing
// among the healthy ones, and waits until a new leader is known. Leader
// only. Refused (ErrRefused) when the target is not a voter, does not
// answer the leader, or no other voter is healthy. Asking the leader to
// transfer to itself changes nothing and succeeds. It returns the new
// leader's name.
func (n *Node) TransferLeadership(ctx context.Context, to string) (string, error) {
	if !n.IsLeader() {
		return "", ErrNotLeader
	}
	servers, err := n.serverHealth()
	if err != nil {
		return "", err
	}
	var target serverHealth
	if to != "" {
		s, ok := findServer(servers, to)
		switch {
		case !ok:
			return "", fmt.Errorf("%w: %q (servers: %s)", ErrUnknownServer, to, serverIDs(servers))
		case string(s.ID) == n.cfg.Name:
			return n.cfg.Name, nil
		case s.Suffrage != raft.Voter:
			return "", fmt.Errorf("%w: %s is a non-voter and cannot lead", ErrRefused, s.ID)
		case !s.healthy:
			return "", fmt.Errorf("%w: %s has not answered the leader for %s or more", ErrRefused, s.ID, n.cfg.LeaderContactTimeout)
		}
		target = s
	} else {
		for _, s := range servers {
			if s.Suffrage == raft.Voter && s.healthy && string(s.ID) != n.cfg.Name {
				target = s
				break
			}
		}
		if target.ID == "" {
			return "", fmt.Errorf("%w: no other voter answers the leader", ErrRefused)
		}
	}
	n.logger.Warn("transferring leadership on operator request", "to", target.ID)
	if err := waitFuture(ctx, n.raft.LeadershipTransferToServer(target.ID, target.Address)); err != nil {
		return "", fmt.Errorf("transfer leadership to %s: %w", target.ID, raftErr(err))
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if _, id := n.raft.LeaderWithID(); id != "" && string(id) != n.cfg.Name {
			return string(id), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("leadership was handed to %s but no new leader is known yet: %w", target.ID, ctx.Err())
		case <-t.C:
		}
	}
}
