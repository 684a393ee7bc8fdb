package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// SubmitWorkflow submits a workflow: all its jobs or none.
func (c *Client) SubmitWorkflow(ctx context.Context, in WorkflowInput) (*WorkflowSubmitResponse, error) {
	var out WorkflowSubmitResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/workflows", nil, in, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// SubmitWorkflowBody submits a workflow already encoded as JSON (a YAML
// file goes through YAMLToJSON first).
func (c *Client) SubmitWorkflowBody(ctx context.Context, body []byte) (*WorkflowSubmitResponse, error) {
	var out WorkflowSubmitResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/workflows", nil, body, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWorkflows returns one page of workflows, newest first.
func (c *Client) ListWorkflows(ctx context.Context, cursor string, limit int, consistent bool) (*WorkflowList, error) {
	v := consistentQuery(consistent)
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out WorkflowList
	if _, err := c.do(ctx, http.MethodGet, "/v1/workflows", v, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetWorkflow returns a workflow with the page of its jobs that starts at
// position from (limit 0: the server's maximum page).
func (c *Client) GetWorkflow(ctx context.Context, id string, from, limit int, consistent bool) (*WorkflowDetail, error) {
	v := consistentQuery(consistent)
	if from > 0 {
		v.Set("from", strconv.Itoa(from))
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out WorkflowDetail
	if _, err := c.do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(id), v, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetWorkflowAll returns a workflow with every job, reading all pages.
func (c *Client) GetWorkflowAll(ctx context.Context, id string, consistent bool) (*WorkflowDetail, error) {
	d, err := c.GetWorkflow(ctx, id, 0, 0, consistent)
	for err == nil && d.NextFrom > 0 {
		var page *WorkflowDetail
		if page, err = c.GetWorkflow(ctx, id, d.NextFrom, 0, consistent); err == nil {
			d.JobList = append(d.JobList, page.JobList...)
			d.NextFrom = page.NextFrom
		}
	}
	return d, err
}

// CancelWorkflow cancels every job of the workflow that is not finished.
func (c *Client) CancelWorkflow(ctx context.Context, id, reason string) (*WorkflowDetail, error) {
	var in any
	if reason != "" {
		in = CancelRequest{Reason: reason}
	}
	var out WorkflowDetail
	if _, err := c.do(ctx, http.MethodDelete, "/v1/workflows/"+url.PathEscape(id), nil, in, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// RetryWorkflow re-runs the failed, cancelled and skipped jobs of a
// workflow (and what depends on them), keeping the succeeded ones.
func (c *Client) RetryWorkflow(ctx context.Context, id string) (*WorkflowDetail, error) {
	var out WorkflowDetail
	if _, err := c.do(ctx, http.MethodPost, "/v1/workflows/"+url.PathEscape(id)+"/retry", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// JobResult returns what the job's last finished attempt wrote to its
// result file.
func (c *Client) JobResult(ctx context.Context, id string, consistent bool) ([]byte, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/result", consistentQuery(consistent), nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 2<<20))
}
