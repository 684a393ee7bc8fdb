package bench

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/httpapi"
)

// The bench submits what the CLI submits: specs as written (the server
// fills the defaults) and no idempotency key made up, so what it measures
// is a plain submit, not one deduplicated in raft.

// submitJob submits one job spec (an httpapi.JobSpecInput, or its JSON);
// dup says key named a job submitted before.
func submitJob(ctx context.Context, cl *api.Client, spec any, key string) (id string, dup bool, err error) {
	res, err := cli.SubmitJob(ctx, cl, spec, key)
	if err != nil {
		return "", false, err
	}
	return res.ID, res.Duplicate, nil
}

// submitJobs submits a batch atomically: specs ([]httpapi.JobSpecInput) or
// a body already encoded as JSON ({"jobs": [...]}).
func submitJobs(ctx context.Context, cl *api.Client, specs any) ([]api.SubmitResponse, error) {
	body := specs
	if _, raw := specs.([]byte); !raw {
		body = map[string]any{"jobs": specs}
	}
	var out []api.SubmitResponse
	if err := cli.SubmitJobs(ctx, cl, body, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// submitWorkflow submits a workflow (an httpapi.WorkflowInput) as it is.
func submitWorkflow(ctx context.Context, cl *api.Client, wf any) (*api.WorkflowSubmitResponse, error) {
	var out api.WorkflowSubmitResponse
	if err := cl.Do(ctx, api.Request{Method: http.MethodPost, Path: "/v1/workflows", Body: wf}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// createSchedule creates a schedule (an httpapi.ScheduleInput) as it is.
func createSchedule(ctx context.Context, cl *api.Client, in any) (*api.ScheduleInfo, error) {
	var out api.ScheduleInfo
	if err := cl.Do(ctx, api.Request{Method: http.MethodPost, Path: "/v1/schedules", Body: in}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// workflowPage reads a workflow with only its first page of jobs (limit
// 0: the server's largest page), through the leader with consistent: a
// poll that needs the state, not the jobs, or the latency of one page.
func workflowPage(ctx context.Context, cl *api.Client, id string, limit int, consistent bool) (*api.WorkflowDetail, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if consistent {
		q.Set("consistent", "true")
	}
	var out api.WorkflowDetail
	if err := cl.Do(ctx, api.Request{Method: http.MethodGet, Path: "/v1/workflows/" + url.PathEscape(id), Query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// nodeViews lists every node as the server's type (fsm.Node inside),
// which the bench's placement arithmetic is written on.
func nodeViews(ctx context.Context, cl *api.Client) ([]httpapi.NodeView, error) {
	l, err := cli.AsServer[httpapi.NodeList](cl.ListNodes(ctx, api.NodeQuery{}))
	if err != nil {
		return nil, err
	}
	return l.Nodes, nil
}

// jobDetail reads a job as the server's type, for the bench's checks
// written on fsm's states.
func jobDetail(ctx context.Context, cl *api.Client, id string) (*httpapi.JobDetail, error) {
	return cli.AsServer[httpapi.JobDetail](cl.GetJob(ctx, id))
}
