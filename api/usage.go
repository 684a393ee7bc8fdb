package api

import (
	"context"
	"net/http"
	"net/url"
)

// Usage returns what finished attempts used, aggregated as q asks.
func (c *Client) Usage(ctx context.Context, q UsageQuery) (*UsageReport, error) {
	v := url.Values{}
	for k, x := range map[string]string{"since": q.Since, "until": q.Until, "by": q.By, "step": q.Step, "namespace": q.Namespace} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return call[UsageReport](ctx, c, Request{Method: http.MethodGet, Path: "/v1/usage", Query: v, read: true})
}
