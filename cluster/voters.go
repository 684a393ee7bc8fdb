package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/hashicorp/raft"
)

// VotersInfo is a server's answer to GET /v1/internal/voters: how many
// raft voters its configuration holds and how many the cluster wants. A
// fresh agent started with only --join asks it to choose its role: it
// joins as a server while the voters are short, as a client once they are
// all there (cli/agent/role.go).
type VotersInfo struct {
	Voters int `json:"voters"`
	Target int `json:"target"`
}

// Full reports whether the cluster has every voter it wants.
func (v VotersInfo) Full() bool { return v.Target > 0 && v.Voters >= v.Target }

// handleVoters answers from this server's latest raft configuration; any
// server will do (a follower's view lags the leader's by at most the
// entries in flight, and the choice it feeds is made once per data dir).
func (n *Node) handleVoters(w http.ResponseWriter, r *http.Request) {
	info := VotersInfo{Target: n.cfg.Voters}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				info.Voters++
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(info)
}

// ErrNoVotersRoute is FetchVoters' error for a peer that does not serve
// the route: an agent from before it, or a client.
var ErrNoVotersRoute = fmt.Errorf("the peer does not serve %svoters", InternalPrefix)

// ErrVotersRefused is FetchVoters' error for a server that refused the
// agent's credential (403: a token of another role): asking again will not
// help.
var ErrVotersRefused = errors.New("refused")

// ErrVotersUnknownCredential is FetchVoters' error for a server that does
// not know the agent's token (401). It is also ErrVotersRefused, but a
// token created a moment ago may not have reached that server yet, so
// another server, or the same one a little later, may know it.
var ErrVotersUnknownCredential = fmt.Errorf("%w", ErrVotersRefused)

// FetchVoters asks the agent at base (a URL from ServerURLs) for its
// VotersInfo; auth (nil: none) adds a credential under ACL.
func FetchVoters(ctx context.Context, hc *http.Client, base string, auth func(http.Header)) (VotersInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+InternalPrefix+"voters", nil)
	if err != nil {
		return VotersInfo{}, err
	}
	if auth != nil {
		auth(req.Header)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return VotersInfo{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return VotersInfo{}, ErrNoVotersRoute
	case resp.StatusCode == http.StatusUnauthorized:
		return VotersInfo{}, fmt.Errorf("%w: %s: %s: %s", ErrVotersUnknownCredential, base, resp.Status, body)
	case resp.StatusCode == http.StatusForbidden:
		return VotersInfo{}, fmt.Errorf("%w: %s: %s: %s", ErrVotersRefused, base, resp.Status, body)
	case resp.StatusCode != http.StatusOK:
		return VotersInfo{}, fmt.Errorf("%s: %s: %s", base, resp.Status, body)
	}
	var info VotersInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return VotersInfo{}, fmt.Errorf("%s: voters: %w", base, err)
	}
	return info, nil
}
