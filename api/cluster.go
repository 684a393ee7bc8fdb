package api

import (
	"context"
	"net/http"
	"net/url"
)

// ListNamespaces lists the namespaces with a record or active jobs that
// the token may read.
func (c *Client) ListNamespaces(ctx context.Context) ([]NamespaceStatus, error) {
	return callList[NamespaceStatus](ctx, c, Request{Method: http.MethodGet, Path: "/v1/namespaces", read: true}, "namespaces")
}

// GetNamespace reads one namespace's quota, policy and usage.
func (c *Client) GetNamespace(ctx context.Context, name string) (*NamespaceStatus, error) {
	return call[NamespaceStatus](ctx, c, Request{Method: http.MethodGet, Path: namespacePath(name), read: true})
}

// SetNamespace creates or replaces a namespace's quota and policy.
func (c *Client) SetNamespace(ctx context.Context, name string, spec NamespaceSpec) (*NamespaceStatus, error) {
	return call[NamespaceStatus](ctx, c, Request{Method: http.MethodPut, Path: namespacePath(name), Body: spec, Idempotent: true})
}

// DeleteNamespace removes a namespace's quota and policy (its jobs stay).
func (c *Client) DeleteNamespace(ctx context.Context, name string) error {
	return c.do(ctx, Request{Method: http.MethodDelete, Path: namespacePath(name)}, nil)
}

// NamespaceShares reads every namespace's fair share, recent and live
// allocation and current factor.
func (c *Client) NamespaceShares(ctx context.Context) (*NamespaceShares, error) {
	return call[NamespaceShares](ctx, c, Request{Method: http.MethodGet, Path: "/v1/namespaces/shares", read: true})
}

func namespacePath(name string) string { return "/v1/namespaces/" + url.PathEscape(name) }

// NodeUsage asks a node what its jobs use now.
func (c *Client) NodeUsage(ctx context.Context, name string) (*NodeUsage, error) {
	return call[NodeUsage](ctx, c, Request{Method: http.MethodGet, Path: nodePath(name) + "/usage"})
}

// Members lists the gossip members as the agent sees them.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	return callList[Member](ctx, c, Request{Method: http.MethodGet, Path: "/v1/cluster/members"}, "members")
}

// Raft describes the agent's raft state.
func (c *Client) Raft(ctx context.Context) (*RaftInfo, error) {
	return call[RaftInfo](ctx, c, Request{Method: http.MethodGet, Path: "/v1/cluster/raft"})
}

// ACLBootstrap makes the first management token of a cluster with
// --acl (once: a second call is ErrConflict).
func (c *Client) ACLBootstrap(ctx context.Context) (*NewToken, error) {
	return call[NewToken](ctx, c, Request{Method: http.MethodPost, Path: "/v1/acl/bootstrap"})
}

// CreateToken makes a token; its secret is in the answer only.
func (c *Client) CreateToken(ctx context.Context, spec TokenSpec) (*NewToken, error) {
	return call[NewToken](ctx, c, Request{Method: http.MethodPost, Path: "/v1/acl/tokens", Body: spec})
}

// ListTokens lists every token, without secrets.
func (c *Client) ListTokens(ctx context.Context) ([]Token, error) {
	return callList[Token](ctx, c, Request{Method: http.MethodGet, Path: "/v1/acl/tokens"}, "tokens")
}

// DeleteToken revokes a token by its accessor ID.
func (c *Client) DeleteToken(ctx context.Context, accessorID string) error {
	return c.do(ctx, Request{Method: http.MethodDelete, Path: "/v1/acl/tokens/" + url.PathEscape(accessorID)}, nil)
}

// TokenSelf describes the client's own token.
func (c *Client) TokenSelf(ctx context.Context) (*Token, error) {
	return call[Token](ctx, c, Request{Method: http.MethodGet, Path: "/v1/acl/token/self"})
}
