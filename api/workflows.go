package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// SubmitWorkflow submits a workflow: all its jobs or none. It carries
// spec.IdempotencyKey, or a key it makes, so a resend answers with the
// first workflow.
func (c *Client) SubmitWorkflow(ctx context.Context, spec WorkflowSpec) (*WorkflowSubmitResponse, error) {
	hdr := keyHeader(&spec.IdempotencyKey)
	return call[WorkflowSubmitResponse](ctx, c, Request{Method: http.MethodPost, Path: "/v1/workflows", Body: spec, Header: hdr, Idempotent: true})
}

// WorkflowQuery pages ListWorkflows.
type WorkflowQuery struct {
	Limit  int
	Cursor string
}

// ListWorkflows returns one page of workflows, newest first.
func (c *Client) ListWorkflows(ctx context.Context, q WorkflowQuery) (*WorkflowList, error) {
	v := url.Values{}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return call[WorkflowList](ctx, c, Request{Method: http.MethodGet, Path: "/v1/workflows", Query: v, read: true})
}

// GetWorkflow returns a workflow with every one of its jobs (reading all
// the pages).
func (c *Client) GetWorkflow(ctx context.Context, id string) (*WorkflowDetail, error) {
	d, err := c.getWorkflowPage(ctx, id, 0)
	for err == nil && d.NextFrom > 0 {
		var page *WorkflowDetail
		if page, err = c.getWorkflowPage(ctx, id, d.NextFrom); err == nil {
			d.JobList = append(d.JobList, page.JobList...)
			d.NextFrom = page.NextFrom
		}
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (c *Client) getWorkflowPage(ctx context.Context, id string, from int) (*WorkflowDetail, error) {
	v := url.Values{}
	if from > 0 {
		v.Set("from", strconv.Itoa(from))
	}
	return call[WorkflowDetail](ctx, c, Request{Method: http.MethodGet, Path: workflowPath(id), Query: v, read: true})
}

// CancelWorkflow cancels every job of the workflow that has not finished.
func (c *Client) CancelWorkflow(ctx context.Context, id, reason string) (*WorkflowDetail, error) {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	return call[WorkflowDetail](ctx, c, Request{Method: http.MethodDelete, Path: workflowPath(id), Body: body})
}

// RetryWorkflow runs the failed, cancelled and skipped jobs of a workflow
// again (and what depends on them), keeping the succeeded ones.
func (c *Client) RetryWorkflow(ctx context.Context, id string) (*WorkflowDetail, error) {
	return call[WorkflowDetail](ctx, c, Request{Method: http.MethodPost, Path: workflowPath(id) + "/retry"})
}

func workflowPath(id string) string { return "/v1/workflows/" + url.PathEscape(id) }
