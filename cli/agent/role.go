package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/cluster"
)

// RoleAuto is --role's default: the agent chooses. The first servers
// (--dev, --bootstrap-expect, no --join) and every agent with --acl are
// servers; a fresh agent that only --joins asks the servers it names
// whether the cluster has all its voters (cluster.VotersInfo) and becomes
// a server while it does not, a client once it does: the way Nomad and
// Kubernetes keep consensus small and every later host a thin worker. The
// choice is kept in the data dir (roleFile), so a restart never flips it.
const RoleAuto = "auto"

// roleFile, in the data dir, holds the role --role auto chose.
const roleFile = "role"

// roleAsk bounds how long a fresh agent asks its --join servers for their
// voters before it gives up and says to pass --role.
var roleAsk = time.Minute

// unknownCredentialGrace is how long --role auto keeps asking while the
// servers say they do not know its token (401) before it exits: a token
// created a moment before, through another server, may not have been
// applied on the ones it asks yet. A token of the wrong role (403) exits
// at once.
var unknownCredentialGrace = 10 * time.Second

// autoRoleWithoutAsking is the role --role auto takes without the network,
// or "" when a fresh joining agent must ask.
func autoRoleWithoutAsking(dev, acl bool, bootstrapExpect int, join []string) string {
	if dev || acl || bootstrapExpect != 0 || len(join) == 0 {
		// Clients cannot hold the cluster-internal secret yet (--acl).
		return RoleServer
	}
	return ""
}

// resolveRole settles --role auto for an agent that only --joins: the
// role kept in its data dir, server for a data dir that already holds raft
// state (an agent from before roles were chosen), else what the first
// server to answer says. Peers that do not serve the route (agents from
// before it) leave the agent a server, as it always was. A server that
// refuses the credential ends the asking: at once for a token of another
// role (403), after unknownCredentialGrace for one it does not know (401).
func resolveRole(ctx context.Context, cc *cluster.Config, auth func(http.Header), logger *slog.Logger) (string, error) {
	if b, err := os.ReadFile(filepath.Join(cc.DataDir, roleFile)); err == nil {
		switch r := strings.TrimSpace(string(b)); r {
		case RoleServer, RoleClient:
			return r, nil
		default:
			return "", fmt.Errorf("%s: %q is not server or client (remove the file or pass --role)", filepath.Join(cc.DataDir, roleFile), r)
		}
	}
	if cluster.HasRaftState(cc.DataDir) {
		return RoleServer, keepRole(cc.DataDir, RoleServer)
	}
	urls, err := cluster.ServerURLs(cc.Join, cc.TLS != nil)
	if err != nil {
		return "", err
	}
	hc := cluster.NewPeerClient(cc)
	ctx, cancel := context.WithTimeout(ctx, roleAsk)
	defer cancel()
	var lastErr error
	var unknownSince time.Time // when a server first said it does not know the token
	refused := func(err error) error {
		return fmt.Errorf("--role auto: %w (under --acl a joining agent asks with its --token-file, which needs role client:NAME)", err)
	}
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		old := 0
		for _, u := range urls {
			askCtx, done := context.WithTimeout(ctx, 5*time.Second)
			info, err := cluster.FetchVoters(askCtx, hc, u, auth)
			done()
			switch {
			case errors.Is(err, cluster.ErrNoVotersRoute):
				old++
				continue
			case errors.Is(err, cluster.ErrVotersUnknownCredential):
				if unknownSince.IsZero() {
					unknownSince = time.Now()
				}
				if time.Since(unknownSince) >= unknownCredentialGrace {
					return "", refused(err)
				}
				lastErr = err
				continue
			case errors.Is(err, cluster.ErrVotersRefused):
				return "", refused(err)
			case err != nil:
				lastErr = err
				continue
			}
			role := RoleServer
			if info.Full() {
				role = RoleClient
			}
			logger.Info("chose the agent's role", "component", "agent", "role", role, "asked", u,
				"voters", info.Voters, "target", info.Target)
			return role, keepRole(cc.DataDir, role)
		}
		if old == len(urls) {
			return RoleServer, keepRole(cc.DataDir, RoleServer)
		}
		logger.Info("no server named by --join told this agent its role yet; asking again", "component", "agent", "err", lastErr)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("--role auto: no server named by --join said whether this agent joins as a server or a client in %s (last: %v); start it with --role server or --role client", roleAsk, lastErr)
		case <-time.After(wait):
		}
	}
}

// keepRole writes the chosen role into the data dir, atomically.
func keepRole(dataDir, role string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	tmp := filepath.Join(dataDir, "."+roleFile+".tmp")
	if err := os.WriteFile(tmp, []byte(role+"\n"), 0o600); err != nil {
		return fmt.Errorf("keep the role: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, roleFile)); err != nil {
		return fmt.Errorf("keep the role: %w", err)
	}
	return nil
}
