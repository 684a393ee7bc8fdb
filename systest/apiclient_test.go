package systest

import (
	"context"
	"net/http"
	"testing"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/httpapi"
)

// apiClient is the client the CLI uses (package api, built by
// cli.NewClient) for the agent at addr.
func apiClient(t testing.TB, addr string, cfg cli.ClientConfig) *api.Client {
	t.Helper()
	cl, err := cli.NewClient(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// submitWorkflow submits wf as it is, as foreman workflow submit does.
func submitWorkflow(ctx context.Context, cl *api.Client, wf httpapi.WorkflowInput) (*api.WorkflowSubmitResponse, error) {
	var out api.WorkflowSubmitResponse
	if err := cl.Do(ctx, api.Request{Method: http.MethodPost, Path: "/v1/workflows", Body: wf}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// workflowAll reads a workflow with every job, as the server's type (the
// tests compare with fsm's states).
func workflowAll(ctx context.Context, cl *api.Client, id string) (*httpapi.WorkflowDetail, error) {
	return cli.AsServer[httpapi.WorkflowDetail](cl.GetWorkflow(ctx, id))
}

// jobDetail reads a job as the server's type.
func jobDetail(ctx context.Context, cl *api.Client, id string) (*httpapi.JobDetail, error) {
	return cli.AsServer[httpapi.JobDetail](cl.GetJob(ctx, id))
}
