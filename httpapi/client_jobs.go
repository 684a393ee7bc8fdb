package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/foreman-sched/foreman/fsm"
)

// SubmitJob submits one job; idemKey (may be empty) goes in the
// Idempotency-Key header. dup reports that the key named an existing job.
func (c *Client) SubmitJob(ctx context.Context, spec JobSpecInput, idemKey string) (id string, dup bool, err error) {
	var hdr http.Header
	if idemKey != "" {
		hdr = http.Header{HeaderIdempotencyKey: {idemKey}}
	}
	var out SubmitResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/jobs", nil, spec, &out, hdr); err != nil {
		return "", false, err
	}
	return out.ID, out.Duplicate, nil
}

// SubmitJobBody is SubmitJob with the spec already encoded as JSON (a
// caller that sends the same spec many times encodes it once).
func (c *Client) SubmitJobBody(ctx context.Context, body []byte, idemKey string) (id string, dup bool, err error) {
	var hdr http.Header
	if idemKey != "" {
		hdr = http.Header{HeaderIdempotencyKey: {idemKey}}
	}
	var out SubmitResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/jobs", nil, body, &out, hdr); err != nil {
		return "", false, err
	}
	return out.ID, out.Duplicate, nil
}

// SubmitJobs submits a batch atomically: all jobs or none.
func (c *Client) SubmitJobs(ctx context.Context, specs []JobSpecInput) ([]SubmitResponse, error) {
	var out BatchSubmitResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/jobs", nil, BatchSubmitRequest{Jobs: specs}, &out, nil); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// SubmitJobsBody is SubmitJobs with the body ({"jobs": [...]}) already
// encoded as JSON.
func (c *Client) SubmitJobsBody(ctx context.Context, body []byte) ([]SubmitResponse, error) {
	var out BatchSubmitResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/jobs", nil, body, &out, nil); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// GetJob returns a job and its attempts; consistent reads through the
// leader.
func (c *Client) GetJob(ctx context.Context, id string, consistent bool) (*JobDetail, error) {
	var out JobDetail
	_, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), consistentQuery(consistent), nil, &out, nil)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// JobTasks returns a gang's tasks (GET /v1/jobs/{id}/tasks).
func (c *Client) JobTasks(ctx context.Context, id string) (*TaskList, error) {
	var out TaskList
	if _, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/tasks", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// JobListQuery filters ListJobs; zero fields do not filter.
type JobListQuery struct {
	State      fsm.JobState
	Labels     map[string]string
	Name       string // prefix
	Queue      string
	Limit      int
	Cursor     string
	Consistent bool
}

// ListJobs returns one page of jobs, newest first; pass NextCursor back as
// Cursor for the next page.
func (c *Client) ListJobs(ctx context.Context, q JobListQuery) (*JobList, error) {
	v := consistentQuery(q.Consistent)
	if q.State != "" {
		v.Set("state", string(q.State))
	}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	if q.Queue != "" {
		v.Set("queue", q.Queue)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	keys := make([]string, 0, len(q.Labels))
	for k := range q.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v.Add("label", k+"="+q.Labels[k])
	}
	var out JobList
	if _, err := c.do(ctx, http.MethodGet, "/v1/jobs", v, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// JobCounts returns how many jobs are in each state.
func (c *Client) JobCounts(ctx context.Context) (*JobCounts, error) {
	var out JobCounts
	if _, err := c.do(ctx, http.MethodGet, "/v1/jobs/counts", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelJob cancels a job; reason may be empty.
func (c *Client) CancelJob(ctx context.Context, id, reason string) (*JobDetail, error) {
	var out JobDetail
	var in any
	if reason != "" {
		in = CancelRequest{Reason: reason}
	}
	if _, err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, in, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// RetryJob re-queues a failed or cancelled job.
func (c *Client) RetryJob(ctx context.Context, id string) (*JobDetail, error) {
	var out JobDetail
	if _, err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/retry", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// StreamLogs copies an attempt's log (stream "stdout" or "stderr";
// attempt 0 = the latest) to w. With follow it returns when the attempt
// has finished and its log is drained, or ctx ends.
func (c *Client) StreamLogs(ctx context.Context, id, stream string, follow bool, attempt int, w io.Writer) error {
	v := url.Values{}
	if stream != "" {
		v.Set("stream", stream)
	}
	if follow {
		v.Set("follow", "true")
	}
	if attempt > 0 {
		v.Set("attempt", strconv.Itoa(attempt))
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/logs", v, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("reading the log of %s: %w", id, err)
	}
	return nil
}

func consistentQuery(consistent bool) url.Values {
	v := url.Values{}
	if consistent {
		v.Set("consistent", "true")
	}
	return v
}

// JobGPUUsage returns what attempt (0: the latest) of job id uses on its
// GPUs, measured by its node.
func (c *Client) JobGPUUsage(ctx context.Context, id string, attempt int) (*JobGPUUsage, error) {
	q := url.Values{}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	var out JobGPUUsage
	if _, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/gpu-usage", q, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}
