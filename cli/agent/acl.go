package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/wallclock"
)

// ensureInternalSecret runs on the leader with ACL on: if the state has
// no cluster-internal secret yet, the leader draws one and commits it, so
// every node can authenticate its /v1/internal/ calls (docs/security.md).
// The leader needs none itself: it applies locally.
func ensureInternalSecret(ctx context.Context, node *cluster.Node, f *fsm.FSM, log *slog.Logger) {
	for ctx.Err() == nil {
		var have bool
		_ = f.View(func(tx *fsm.Tx) error { have = tx.ACLInternalSecret() != ""; return nil })
		if have {
			return
		}
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			log.Error("cluster-internal secret not set", "component", "acl", "err", err)
			return
		}
		cmd, err := fsm.NewCommand(fsm.CmdACLInternal, wallclock.Now(), fsm.ACLInternal{Secret: base64.RawURLEncoding.EncodeToString(b)})
		if err != nil {
			log.Error("cluster-internal secret not set", "component", "acl", "err", err)
			return
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := node.Apply(actx, cmd)
		cancel()
		if err == nil && res != nil && res.Err == nil {
			log.Info("cluster-internal secret set", "component", "acl")
			return
		}
		log.Warn("setting the cluster-internal secret failed; retrying", "component", "acl", "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
