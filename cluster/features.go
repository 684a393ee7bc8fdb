package cluster

import (
	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/fsm"
)

// advertisedFeatures is what this node gossips it can apply beyond the
// baseline (Config.AdvertiseFeatures in tests).
func (n *Node) advertisedFeatures() fsm.FeatureSet {
	if n.cfg.AdvertiseFeatures != nil {
		return *n.cfg.AdvertiseFeatures
	}
	return fsm.KnownFeatures
}

// FeatureGate is, for every server of the current raft configuration
// (voters, non-voters and staging: all of them apply the log), what it
// advertises in gossip as this node sees it. A server whose gossip this
// node has lost keeps its last advertisement (a dead member stays in the
// table); one never heard has the baseline only. Clients are left out:
// they apply no log.
func (n *Node) FeatureGate() fsm.FeatureGate {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return fsm.FeatureGate{}
	}
	servers := f.Configuration().Servers
	g := fsm.FeatureGate{Servers: make([]fsm.ServerFeatures, 0, len(servers))}
	for _, s := range servers {
		g.Servers = append(g.Servers, n.serverFeatures(s))
	}
	return g
}

func (n *Node) serverFeatures(s raft.Server) fsm.ServerFeatures {
	id := string(s.ID)
	if id == n.cfg.Name {
		return fsm.ServerFeatures{ID: id, Version: n.Self().Version, Features: n.advertisedFeatures(), Known: true}
	}
	m, ok := n.members.get(id)
	if !ok {
		return fsm.ServerFeatures{ID: id}
	}
	return fsm.ServerFeatures{ID: id, Version: m.Version, Features: m.Features, Known: true}
}

// checkFeatures refuses, before anything is proposed, a command that
// needs a feature some server cannot apply: an older server's codec would
// skip the new fields (or refuse the new kind) and its state would part
// from the others' for good. It costs nothing while every server has every
// feature of this build; otherwise it decodes the payload.
func (n *Node) checkFeatures(cmd *fsm.Command) error {
	g := n.FeatureGate()
	if fsm.KnownFeatures&^g.Enabled() == 0 {
		return nil
	}
	need, err := cmd.Needs()
	if err != nil {
		return nil // Apply refuses it with its own message
	}
	return g.Check(need)
}
