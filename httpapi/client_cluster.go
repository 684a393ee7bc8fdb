package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Nodes lists every node with its allocation.
func (c *Client) Nodes(ctx context.Context) ([]NodeView, error) {
	var out NodeList
	if _, err := c.do(ctx, http.MethodGet, "/v1/nodes", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Nodes, nil
}

// NodesQuery returns the nodes q selects (a page when q.Limit is set) and
// the summary of them all.
func (c *Client) NodesQuery(ctx context.Context, q NodeQuery) (*NodeList, error) {
	v := url.Values{}
	for k, x := range map[string]string{"role": q.Role, "state": q.State, "name": q.Name, "cursor": q.Cursor} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out NodeList
	if _, err := c.do(ctx, http.MethodGet, "/v1/nodes", v, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// Node returns one node with its live attempts.
func (c *Client) Node(ctx context.Context, name string) (*NodeDetail, error) {
	var out NodeDetail
	if _, err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(name), nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// NodeUsage asks a node what its jobs use now (measured by that node).
func (c *Client) NodeUsage(ctx context.Context, name string) (*NodeUsage, error) {
	var out NodeUsage
	if _, err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(name)+"/usage", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// DrainNode stops new placements on a node; running attempts get deadline
// (0 = until they finish).
func (c *Client) DrainNode(ctx context.Context, name string, deadline time.Duration) (*NodeDetail, error) {
	var out NodeDetail
	in := DrainRequest{Deadline: fsm.Duration(deadline)}
	if _, err := c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(name)+"/drain", nil, in, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// MarkDown declares a client dead (POST /v1/nodes/{name}/down).
func (c *Client) MarkDown(ctx context.Context, name string) (*NodeDetail, error) {
	var out NodeDetail
	if _, err := c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(name)+"/down", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResetNodeGPUs forgets the XID faults of a node's GPUs (uuids; none:
// every unhealthy one).
func (c *Client) ResetNodeGPUs(ctx context.Context, name string, uuids []string) (*GPUResetResponse, error) {
	var out GPUResetResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(name)+"/gpus/reset", nil, GPUResetRequest{UUIDs: uuids}, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetEligibility marks a node eligible or ineligible for new attempts.
func (c *Client) SetEligibility(ctx context.Context, name string, e fsm.Eligibility) (*NodeDetail, error) {
	var out NodeDetail
	in := EligibilityRequest{Eligibility: e}
	if _, err := c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(name)+"/eligibility", nil, in, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetQueue sets a queue's concurrency limit (0 = unlimited).
func (c *Client) SetQueue(ctx context.Context, name string, maxRunning int) (*Queue, error) {
	var out Queue
	in := SetQueueRequest{MaxRunning: &maxRunning}
	if _, err := c.do(ctx, http.MethodPut, "/v1/queues/"+url.PathEscape(name), nil, in, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// Queues lists queues with limits or running work.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	var out QueueList
	if _, err := c.do(ctx, http.MethodGet, "/v1/queues", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Queues, nil
}

// Members lists the gossip members as the agent sees them.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var out MemberList
	if _, err := c.do(ctx, http.MethodGet, "/v1/cluster/members", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Members, nil
}

// Raft describes the agent's raft state.
func (c *Client) Raft(ctx context.Context) (*RaftInfo, error) {
	var out RaftInfo
	if _, err := c.do(ctx, http.MethodGet, "/v1/cluster/raft", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// Join asks the agent to join the cluster at addrs.
func (c *Client) Join(ctx context.Context, addrs []string) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/cluster/join", nil, JoinRequest{Addrs: addrs}, nil, nil)
	return err
}

// Leave asks the agent to leave its cluster gracefully.
func (c *Client) Leave(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/cluster/leave", nil, nil, nil, nil)
	return err
}

// Hash returns the agent's state hash and the index it was taken at.
func (c *Client) Hash(ctx context.Context) (*HashResponse, error) {
	var out HashResponse
	if _, err := c.do(ctx, http.MethodGet, "/v1/cluster/hash", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}
