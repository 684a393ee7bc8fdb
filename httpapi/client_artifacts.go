package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ListArtifacts returns the artifacts of a job's attempt (attempt 0: its
// last finished one).
func (c *Client) ListArtifacts(ctx context.Context, id string, attempt int) (*ArtifactList, error) {
	var out ArtifactList
	if _, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/artifacts", attemptQuery(attempt), nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetArtifact copies one artifact's bytes to w and returns how many.
func (c *Client) GetArtifact(ctx context.Context, id string, attempt int, path string, w io.Writer) (int64, error) {
	els := strings.Split(path, "/")
	for i, e := range els {
		els[i] = url.PathEscape(e)
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/artifacts/"+strings.Join(els, "/"), attemptQuery(attempt), nil, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("reading artifact %s of %s: %w", path, id, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("artifact %s of %s: got %d of %d bytes", path, id, n, resp.ContentLength)
	}
	return n, nil
}

func attemptQuery(attempt int) url.Values {
	v := url.Values{}
	if attempt > 0 {
		v.Set("attempt", strconv.Itoa(attempt))
	}
	return v
}
