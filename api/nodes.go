package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ListNodes returns the nodes q selects (one page when q.Limit is set) and
// the summary of them all.
func (c *Client) ListNodes(ctx context.Context, q NodeQuery) (*NodeList, error) {
	v := url.Values{}
	for k, x := range map[string]string{"role": q.Role, "state": q.State, "name": q.Name, "cursor": q.Cursor} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return call[NodeList](ctx, c, Request{Method: http.MethodGet, Path: "/v1/nodes", Query: v, read: true})
}

// GetNode returns one node with its live attempts.
func (c *Client) GetNode(ctx context.Context, name string) (*NodeDetail, error) {
	return call[NodeDetail](ctx, c, Request{Method: http.MethodGet, Path: nodePath(name), read: true})
}

// DrainNode stops new placements on a node; its running attempts get
// deadline to finish (0: as long as they take).
func (c *Client) DrainNode(ctx context.Context, name string, deadline time.Duration) (*NodeDetail, error) {
	body := struct {
		Deadline Duration `json:"deadline,omitempty"`
	}{Duration(deadline)}
	return call[NodeDetail](ctx, c, Request{Method: http.MethodPost, Path: nodePath(name) + "/drain", Body: body})
}

// ResetNodeGPUs forgets the XID faults of a node's GPUs: those named, or
// every device the node shows unhealthy when uuids is empty. The node's
// agent detects again and publishes them healthy within seconds.
func (c *Client) ResetNodeGPUs(ctx context.Context, name string, uuids ...string) (*GPUResetResponse, error) {
	body := struct {
		UUIDs []string `json:"uuids,omitempty"`
	}{uuids}
	return call[GPUResetResponse](ctx, c, Request{Method: http.MethodPost, Path: nodePath(name) + "/gpus/reset", Body: body})
}

// SetEligibility makes a node eligible (true) or ineligible for new
// attempts.
func (c *Client) SetEligibility(ctx context.Context, name string, eligible bool) (*NodeDetail, error) {
	e := "ineligible"
	if eligible {
		e = "eligible"
	}
	return call[NodeDetail](ctx, c, Request{Method: http.MethodPost, Path: nodePath(name) + "/eligibility",
		Body: map[string]string{"eligibility": e}, Idempotent: true})
}

// ListQueues lists the queues with limits or running work.
func (c *Client) ListQueues(ctx context.Context) ([]Queue, error) {
	return callList[Queue](ctx, c, Request{Method: http.MethodGet, Path: "/v1/queues", read: true}, "queues")
}

// SetQueue sets a queue's concurrency limit (0: unlimited).
func (c *Client) SetQueue(ctx context.Context, name string, maxRunning int) (*Queue, error) {
	return call[Queue](ctx, c, Request{Method: http.MethodPut, Path: "/v1/queues/" + url.PathEscape(name),
		Body: map[string]int{"max_running": maxRunning}, Idempotent: true})
}

// StateHash returns the node's state hash and the index it was taken at.
func (c *Client) StateHash(ctx context.Context) (*HashResponse, error) {
	return call[HashResponse](ctx, c, Request{Method: http.MethodGet, Path: "/v1/cluster/hash"})
}

func nodePath(name string) string { return "/v1/nodes/" + url.PathEscape(name) }
