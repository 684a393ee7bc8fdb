package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/jepsen/checker"
)

// SubmitWorkflow posts a workflow and returns its ID.
func (c *Client) SubmitWorkflow(ctx context.Context, wf any) (string, error) {
	var out api.WorkflowSubmitResponse
	_, err := c.do(ctx, http.MethodPost, "/v1/workflows", nil, wf, &out)
	if err == nil && out.ID == "" {
		err = fmt.Errorf("submit workflow: empty id in answer")
	}
	return out.ID, err
}

// Workflow reads a workflow's state and every job of it (all pages), as
// checker.DAGJobs with their parents' IDs.
func (c *Client) Workflow(ctx context.Context, id string) (state string, jobs []checker.DAGJob, err error) {
	from := 0
	names := map[string]string{} // name → ID, for depends_on
	var deps [][]string
	for page := 0; page < 100; page++ {
		var out api.WorkflowDetail
		q := url.Values{"from": {fmt.Sprint(from)}}
		if _, err := c.do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(id)+"?"+q.Encode(), nil, nil, &out); err != nil {
			return "", nil, err
		}
		state = string(out.State)
		for _, j := range out.JobList {
			names[j.Name] = j.ID
			jobs = append(jobs, checker.DAGJob{ID: j.ID, Workflow: id, Name: j.Name, State: string(j.State), Condition: j.Condition})
			if j.Array != nil {
				a, err := c.arrayOf(ctx, j.ID)
				if err != nil {
					return "", nil, err
				}
				jobs[len(jobs)-1].Array = a
			}
			deps = append(deps, j.DependsOn)
		}
		if out.NextFrom == 0 {
			break
		}
		from = out.NextFrom
	}
	for i, ds := range deps {
		for _, n := range ds {
			jobs[i].Parents = append(jobs[i].Parents, names[n])
		}
	}
	return state, jobs, nil
}

// AfterJob reads a job submitted with after (outside any workflow) as
// checker.DAGJob: its parents and each one's requirement.
func (c *Client) AfterJob(ctx context.Context, id string) (checker.DAGJob, error) {
	var out api.JobDetail
	if _, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return checker.DAGJob{}, err
	}
	j := checker.DAGJob{ID: out.Job.ID, Name: out.Job.Spec.Name, State: string(out.Job.State), Parents: out.Job.Spec.DependsOn, After: map[string]string{}}
	for _, a := range out.Job.Spec.After {
		j.After[a.Job] = a.On
	}
	return j, nil
}

// WorkflowIDs lists every workflow's ID (newest first).
func (c *Client) WorkflowIDs(ctx context.Context) ([]string, error) {
	var ids []string
	err := getPages(ctx, c, "/v1/workflows", url.Values{}, 1000, "list workflows", func(out *api.WorkflowList) (string, error) {
		for _, w := range out.Workflows {
			ids = append(ids, w.ID)
		}
		return out.NextCursor, nil
	})
	return ids, err
}

// arrayOf reads an array job's bound and its made tasks.
func (c *Client) arrayOf(ctx context.Context, id string) (*checker.DAGArray, error) {
	var d api.JobDetail
	if _, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, nil, &d); err != nil {
		return nil, err
	}
	if d.Job.Spec.Array == nil || d.Job.Array == nil {
		return nil, fmt.Errorf("job %s is not an array", id)
	}
	a := &checker.DAGArray{Size: d.Job.Array.Size, Parallel: d.Job.Spec.Array.Parallel}
	err := getPages(ctx, c, "/v1/jobs", url.Values{"array": {id}}, 1000, "array "+id+" tasks", func(out *api.JobList) (string, error) {
		for _, t := range out.Jobs {
			if t.ArrayTask == nil {
				return "", fmt.Errorf("array %s lists %s, which is not one of its tasks", id, t.ID)
			}
			a.Tasks = append(a.Tasks, checker.DAGTask{ID: t.ID, Index: t.ArrayTask.Index, State: string(t.State)})
		}
		return out.NextCursor, nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}
