package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// SaveSnapshot downloads a snapshot of the whole state (a backup file) into
// w and returns the bytes written. The caller checks the file (a transfer
// cut short is caught by its checksum, see fsm.ReadBackup).
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/operator/snapshot", nil, nil, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(w, resp.Body)
}

// RestoreSnapshot uploads a backup file and replaces the cluster's state
// with it; force replaces a state that holds jobs.
func (c *Client) RestoreSnapshot(ctx context.Context, file io.Reader, force bool) (*RestoreResponse, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	var out RestoreResponse
	if _, err := c.do(ctx, http.MethodPut, "/v1/operator/snapshot", q, file, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemovePeer removes a server (name or raft address) from raft.
func (c *Client) RemovePeer(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/cluster/raft/peers/"+url.PathEscape(name), nil, nil, nil, nil)
	return err
}

// TransferLeadership hands leadership to the voter to ("" = any healthy
// voter) and returns the new leader's name.
func (c *Client) TransferLeadership(ctx context.Context, to string) (string, error) {
	var out TransferResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/cluster/raft/transfer-leadership", nil, TransferRequest{To: to}, &out, nil); err != nil {
		return "", err
	}
	return out.Leader, nil
}

// GossipKeys lists every alive node's gossip keys (fingerprints).
func (c *Client) GossipKeys(ctx context.Context) (*GossipKeysResponse, error) {
	var out GossipKeysResponse
	if _, err := c.do(ctx, http.MethodGet, "/v1/operator/gossip-keys", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// GossipKeyOp installs, uses (makes primary) or removes key on every alive
// node.
func (c *Client) GossipKeyOp(ctx context.Context, op, key string) (*GossipKeysResponse, error) {
	var out GossipKeysResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/operator/gossip-keys", nil, GossipKeyRequest{Op: op, Key: key}, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}
