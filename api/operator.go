package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
)

// Join asks the agent to join the cluster of the agents at addrs.
func (c *Client) Join(ctx context.Context, addrs []string) error {
	return c.do(ctx, Request{Method: http.MethodPost, Path: "/v1/cluster/join", Body: map[string][]string{"addrs": addrs}}, nil)
}

// Leave asks the agent to leave its cluster gracefully.
func (c *Client) Leave(ctx context.Context) error {
	return c.do(ctx, Request{Method: http.MethodPost, Path: "/v1/cluster/leave"}, nil)
}

// MarkDown declares a client agent dead now, instead of waiting for its
// silence to count (its attempts become lost).
func (c *Client) MarkDown(ctx context.Context, name string) (*NodeDetail, error) {
	return call[NodeDetail](ctx, c, Request{Method: http.MethodPost, Path: nodePath(name) + "/down"})
}

// RemovePeer removes a server (name or raft address) from raft.
func (c *Client) RemovePeer(ctx context.Context, name string) error {
	return c.do(ctx, Request{Method: http.MethodDelete, Path: "/v1/cluster/raft/peers/" + url.PathEscape(name)}, nil)
}

// TransferLeadership hands leadership to the voter to ("": any healthy
// voter) and returns the new leader's name.
func (c *Client) TransferLeadership(ctx context.Context, to string) (string, error) {
	var body struct {
		To string `json:"to,omitempty"`
	}
	body.To = to
	var out TransferResponse
	if err := c.do(ctx, Request{Method: http.MethodPost, Path: "/v1/cluster/raft/transfer-leadership", Body: body}, &out); err != nil {
		return "", err
	}
	return out.Leader, nil
}

// SaveSnapshot copies a snapshot of the whole state (a backup file) to w
// and returns the bytes written. A transfer cut short is caught by the
// file's checksum when it is read or restored.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, Request{Method: http.MethodGet, Path: "/v1/operator/snapshot"})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(w, resp.Body)
}

// RestoreSnapshot uploads a backup file and replaces the cluster's state
// with it; force replaces a state that holds jobs. The file is streamed
// and sent once, never again.
func (c *Client) RestoreSnapshot(ctx context.Context, file io.Reader, force bool) (*RestoreResponse, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return call[RestoreResponse](ctx, c, Request{Method: http.MethodPut, Path: "/v1/operator/snapshot", Query: q, Body: file})
}

// GossipKeys lists every alive node's gossip keys (fingerprints).
func (c *Client) GossipKeys(ctx context.Context) (*GossipKeysResponse, error) {
	return call[GossipKeysResponse](ctx, c, Request{Method: http.MethodGet, Path: "/v1/operator/gossip-keys"})
}

// GossipKeyOp installs, uses (makes primary) or removes a gossip key
// (base64) on every alive node: op is "install", "use" or "remove".
func (c *Client) GossipKeyOp(ctx context.Context, op, key string) (*GossipKeysResponse, error) {
	var out GossipKeysResponse
	body := map[string]string{"op": op, "key": key}
	if err := c.do(ctx, Request{Method: http.MethodPost, Path: "/v1/operator/gossip-keys", Body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RotateInternalSecret replaces the secret agents present to each
// other's internal routes (the previous one stays accepted until the
// next rotation).
func (c *Client) RotateInternalSecret(ctx context.Context) (*InternalRotateResponse, error) {
	return call[InternalRotateResponse](ctx, c, Request{Method: http.MethodPost, Path: "/v1/acl/internal-secret/rotate"})
}

// CheckpointMax is the largest checkpoint the API keeps for a job.
const CheckpointMax = 1 << 20

// PutCheckpoint stores a job's checkpoint (at most CheckpointMax bytes),
// which its next attempt finds in /foreman/checkpoint.
func (c *Client) PutCheckpoint(ctx context.Context, id string, data []byte) (*CheckpointInfo, error) {
	return call[CheckpointInfo](ctx, c, Request{Method: http.MethodPost, Path: jobPath(id) + "/checkpoint", Body: io.Reader(bytes.NewReader(data))})
}

// Checkpoint returns the checkpoint kept for a job.
func (c *Client) Checkpoint(ctx context.Context, id string) ([]byte, error) {
	resp, err := c.send(ctx, Request{Method: http.MethodGet, Path: jobPath(id) + "/checkpoint"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, CheckpointMax+1))
	if err == nil && len(b) > CheckpointMax {
		err = errors.New("checkpoint larger than the API allows")
	}
	return b, err
}

// NodesDownRequest picks the clients MarkNodesDown declares dead: every
// given filter must match, and at least one of Silent, Labels and Names
// is needed. Silent: clients shown silent (the leader holds their deaths),
// for at least SilentFor. DryRun lists them and changes nothing.
type NodesDownRequest struct {
	Silent    bool              `json:"silent,omitempty"`
	SilentFor Duration          `json:"silent_for,omitempty"`
	Role      string            `json:"role,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Names     []string          `json:"names,omitempty"`
	DryRun    bool              `json:"dry_run,omitempty"`
}

// NodesDownResponse names the clients declared dead (or that would be),
// in the one raft entry Index.
type NodesDownResponse struct {
	Nodes  []string `json:"nodes"`
	DryRun bool     `json:"dry_run"`
	Index  uint64   `json:"index,omitempty"`
}

// MarkNodesDown declares many clients dead in one raft entry (POST
// /v1/nodes/down).
func (c *Client) MarkNodesDown(ctx context.Context, req NodesDownRequest) (*NodesDownResponse, error) {
	return call[NodesDownResponse](ctx, c, Request{Method: http.MethodPost, Path: "/v1/nodes/down", Body: req})
}

// NodesDrainRequest picks the nodes DrainNodes drains: every given filter
// must match, and Labels or Names is needed (an empty filter would take
// the whole fleet). Role is server, replica or client. Deadline: attempts
// still running after it are stopped (0: they finish). DryRun lists the
// nodes and changes nothing.
type NodesDrainRequest struct {
	Role     string            `json:"role,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Names    []string          `json:"names,omitempty"`
	Deadline Duration          `json:"deadline,omitempty"`
	DryRun   bool              `json:"dry_run,omitempty"`
}

// NodesEligibilityRequest picks the nodes SetNodesEligibility marks
// Eligibility (eligible or ineligible), with NodesDrainRequest's filter.
type NodesEligibilityRequest struct {
	Role        string            `json:"role,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Names       []string          `json:"names,omitempty"`
	Eligibility string            `json:"eligibility"`
	DryRun      bool              `json:"dry_run,omitempty"`
}

// NodesChangeResponse names the nodes a bulk drain or eligibility change
// changed (or would, with DryRun) in the one raft entry Index, and those
// the filter matched that were so already.
type NodesChangeResponse struct {
	Nodes     []string `json:"nodes"`
	Unchanged []string `json:"unchanged,omitempty"`
	DryRun    bool     `json:"dry_run"`
	Index     uint64   `json:"index,omitempty"`
}

// DrainNodes drains every node the filter matches in one raft entry (POST
// /v1/nodes/drain).
func (c *Client) DrainNodes(ctx context.Context, req NodesDrainRequest) (*NodesChangeResponse, error) {
	return call[NodesChangeResponse](ctx, c, Request{Method: http.MethodPost, Path: "/v1/nodes/drain", Body: req})
}

// SetNodesEligibility marks every node the filter matches eligible or
// ineligible in one raft entry (POST /v1/nodes/eligibility).
func (c *Client) SetNodesEligibility(ctx context.Context, req NodesEligibilityRequest) (*NodesChangeResponse, error) {
	return call[NodesChangeResponse](ctx, c, Request{Method: http.MethodPost, Path: "/v1/nodes/eligibility", Body: req, Idempotent: true})
}
