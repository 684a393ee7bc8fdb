package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/foreman-sched/foreman/api"
)

// GossipKeyring rotates the gossip encryption key on every alive node
// (cluster.Node.GossipKeyringAll through the agent's adapter). Errors:
// ErrBadGossipKey (400), ErrRefused (409: gossip not encrypted, a key not
// installed everywhere before use, the primary key removed).
type GossipKeyring interface {
	GossipKeyringAll(ctx context.Context, op, key string) ([]NodeGossipKeys, error)
}

// ErrBadGossipKey: the key is not base64 of 16, 24 or 32 bytes.
var ErrBadGossipKey = errors.New("bad gossip key")

// GossipKey is one installed key, by fingerprint (the key never leaves
// the nodes).
type GossipKey = api.GossipKey

// NodeGossipKeys is one node's keyring after the operation, or its error.
type NodeGossipKeys = api.NodeGossipKeys

// GossipKeyRequest is the body of POST /v1/operator/gossip-keys.
type GossipKeyRequest struct {
	Op  string `json:"op"`  // install, use or remove
	Key string `json:"key"` // base64
}

// GossipKeysResponse is the reply of GET and POST /v1/operator/gossip-keys:
// every alive node's keyring; OK is false when a node failed (its Error
// says why; every step is idempotent: run it again).
type GossipKeysResponse = api.GossipKeysResponse

// listGossipKeys handles GET /v1/operator/gossip-keys.
func (s *server) listGossipKeys(w http.ResponseWriter, r *http.Request) {
	s.gossipKeys(w, r, "list", "")
}

// changeGossipKeys handles POST /v1/operator/gossip-keys.
func (s *server) changeGossipKeys(w http.ResponseWriter, r *http.Request) {
	var req GossipKeyRequest
	if err := s.decodeOptional(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch req.Op {
	case "install", "use", "remove":
	default:
		s.writeError(w, r, invalid("op", "want install, use or remove (got %q)", req.Op))
		return
	}
	if req.Key == "" {
		s.writeError(w, r, invalid("key", "must be set (base64; foreman tls gossip-key makes one)"))
		return
	}
	s.gossipKeys(w, r, req.Op, req.Key)
}

func (s *server) gossipKeys(w http.ResponseWriter, r *http.Request, op, key string) {
	if s.keyring == nil {
		s.writeError(w, r, fmt.Errorf("%w: this node cannot change gossip keys", ErrUnavailable))
		return
	}
	nodes, err := s.keyring.GossipKeyringAll(r.Context(), op, key)
	if errors.Is(err, ErrBadGossipKey) {
		s.writeError(w, r, invalid("key", "%v", err))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := GossipKeysResponse{Op: op, OK: true, Nodes: nodes}
	for _, n := range nodes {
		if n.Error != "" {
			out.OK = false
		}
	}
	if out.Nodes == nil {
		out.Nodes = []NodeGossipKeys{}
	}
	writeJSON(w, http.StatusOK, out)
}
