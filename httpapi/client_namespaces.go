package httpapi

import (
	"context"
	"net/http"
	"net/url"
)

// SetNamespace creates or replaces a namespace's quota and policy.
func (c *Client) SetNamespace(ctx context.Context, name string, in SetNamespaceRequest) (*NamespaceStatus, error) {
	var out NamespaceStatus
	if _, err := c.do(ctx, http.MethodPut, "/v1/namespaces/"+url.PathEscape(name), nil, in, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// NamespaceStatus reads one namespace's quota, policy and usage.
func (c *Client) NamespaceStatus(ctx context.Context, name string) (*NamespaceStatus, error) {
	var out NamespaceStatus
	if _, err := c.do(ctx, http.MethodGet, "/v1/namespaces/"+url.PathEscape(name), nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// Namespaces lists the namespaces with a record or active jobs that the
// token may read.
func (c *Client) Namespaces(ctx context.Context) ([]NamespaceStatus, error) {
	var out NamespaceList
	if _, err := c.do(ctx, http.MethodGet, "/v1/namespaces", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Namespaces, nil
}

// DeleteNamespace removes a namespace's quota and policy (its jobs stay).
func (c *Client) DeleteNamespace(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/namespaces/"+url.PathEscape(name), nil, nil, nil, nil)
	return err
}
