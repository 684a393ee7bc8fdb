package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
)

// SubmitJob submits one job. It carries spec.IdempotencyKey, or a key it
// makes, so a resend after a broken connection or a 502/503/504 answers
// with the first job; Duplicate in the answer says the key named a job
// submitted before.
func (c *Client) SubmitJob(ctx context.Context, spec JobSpec) (*SubmitResponse, error) {
	hdr := keyHeader(&spec.IdempotencyKey)
	return call[SubmitResponse](ctx, c, Request{Method: http.MethodPost, Path: "/v1/jobs", Body: spec, Header: hdr, Idempotent: true})
}

// SubmitJobs submits a batch atomically: all jobs or none. Each job
// without an idempotency key gets one, so a resent batch makes no second
// copy. The answers are in the specs' order.
func (c *Client) SubmitJobs(ctx context.Context, specs []JobSpec) ([]SubmitResponse, error) {
	jobs := make([]JobSpec, len(specs))
	for i, s := range specs {
		if s.IdempotencyKey == "" {
			s.IdempotencyKey = newKey()
		}
		jobs[i] = s
	}
	return callList[SubmitResponse](ctx, c, Request{Method: http.MethodPost, Path: "/v1/jobs",
		Body: map[string][]JobSpec{"jobs": jobs}, Idempotent: true}, "jobs")
}

// SubmitJobJSON submits a job spec, or a batch ({"jobs": [...]}), already
// encoded as JSON (a spec file; YAML must be turned into JSON first).
// The body goes as it is: the server checks it, strictly. A single job
// carries the body's idempotency_key, else key, else one made here, so it
// is retried like SubmitJob; a batch is retried only when every job
// carries a key. The answers are in the body's order.
func (c *Client) SubmitJobJSON(ctx context.Context, body []byte, key string) ([]SubmitResponse, error) {
	var peek struct {
		IdempotencyKey string `json:"idempotency_key"`
		Jobs           []struct {
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(body, &peek); err != nil {
		return nil, fmt.Errorf("job spec: %w", err)
	}
	r := Request{Method: http.MethodPost, Path: "/v1/jobs", Body: body}
	if peek.Jobs == nil {
		switch {
		case peek.IdempotencyKey != "":
			key = peek.IdempotencyKey
		case key == "":
			key = newKey()
		}
		r.Header, r.Idempotent = http.Header{headerIdempotencyKey: {key}}, true
		var out SubmitResponse
		if err := c.do(ctx, r, &out); err != nil {
			return nil, err
		}
		return []SubmitResponse{out}, nil
	}
	r.Idempotent = true
	for _, j := range peek.Jobs {
		r.Idempotent = r.Idempotent && j.IdempotencyKey != ""
	}
	return callList[SubmitResponse](ctx, c, r, "jobs")
}

// GetJob returns a job and its attempts.
func (c *Client) GetJob(ctx context.Context, id string) (*JobDetail, error) {
	return call[JobDetail](ctx, c, Request{Method: http.MethodGet, Path: jobPath(id), read: true})
}

// JobQuery filters ListJobs; zero fields do not filter.
type JobQuery struct {
	State  JobState
	Labels map[string]string // every one must match
	Name   string            // prefix
	Queue  string
	Array  string // lists the tasks of this array job (else tasks are left out)
	Limit  int    // 0: the server's default page
	Cursor string // JobList.NextCursor of the page before
}

// ListJobs returns one page of jobs, newest first.
func (c *Client) ListJobs(ctx context.Context, q JobQuery) (*JobList, error) {
	v := url.Values{}
	for k, x := range map[string]string{"state": string(q.State), "name": q.Name, "queue": q.Queue, "array": q.Array, "cursor": q.Cursor} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	keys := make([]string, 0, len(q.Labels))
	for k := range q.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v.Add("label", k+"="+q.Labels[k])
	}
	return call[JobList](ctx, c, Request{Method: http.MethodGet, Path: "/v1/jobs", Query: v, read: true})
}

// JobCounts returns how many jobs are in each state.
func (c *Client) JobCounts(ctx context.Context) (*JobCounts, error) {
	return call[JobCounts](ctx, c, Request{Method: http.MethodGet, Path: "/v1/jobs/counts", read: true})
}

// JobTasks returns a gang's tasks.
func (c *Client) JobTasks(ctx context.Context, id string) (*TaskList, error) {
	return call[TaskList](ctx, c, Request{Method: http.MethodGet, Path: jobPath(id) + "/tasks", read: true})
}

// JobEvents returns a job's timeline, oldest first.
func (c *Client) JobEvents(ctx context.Context, id string) ([]Event, error) {
	var out JobTimeline
	if err := c.do(ctx, Request{Method: http.MethodGet, Path: jobPath(id) + "/events", read: true}, &out); err != nil {
		return nil, err
	}
	return out.Events, nil
}

// CancelJob cancels a job (reason may be empty). Cancelling a finished
// job is ErrConflict.
func (c *Client) CancelJob(ctx context.Context, id, reason string) (*JobDetail, error) {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	return call[JobDetail](ctx, c, Request{Method: http.MethodPost, Path: jobPath(id) + "/cancel", Body: body})
}

// RetryJob queues a failed or cancelled job again.
func (c *Client) RetryJob(ctx context.Context, id string) (*JobDetail, error) {
	return call[JobDetail](ctx, c, Request{Method: http.MethodPost, Path: jobPath(id) + "/retry"})
}

// CancelIndexes cancels some tasks of an array job: indexes such as
// "3,7-9"; those not made yet never will be.
func (c *Client) CancelIndexes(ctx context.Context, id, indexes, reason string) (*JobDetail, error) {
	body := map[string]string{"indexes": indexes}
	if reason != "" {
		body["reason"] = reason
	}
	return call[JobDetail](ctx, c, Request{Method: http.MethodPost, Path: jobPath(id) + "/cancel", Body: body})
}

// RetryIndexes runs again some tasks of an array job ("3,7-9").
func (c *Client) RetryIndexes(ctx context.Context, id, indexes string) (*JobDetail, error) {
	return call[JobDetail](ctx, c, Request{Method: http.MethodPost, Path: jobPath(id) + "/retry", Body: map[string]string{"indexes": indexes}})
}

// JobResult returns what the job's last finished attempt wrote to its
// result file.
func (c *Client) JobResult(ctx context.Context, id string) ([]byte, error) {
	resp, err := c.send(ctx, Request{Method: http.MethodGet, Path: jobPath(id) + "/result", read: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 2<<20))
}

// JobGPUUsage returns what a running attempt's processes use on each GPU
// it holds (attempt 0: the latest), measured by its node.
func (c *Client) JobGPUUsage(ctx context.Context, id string, attempt int) (*JobGPUUsage, error) {
	return call[JobGPUUsage](ctx, c, Request{Method: http.MethodGet, Path: jobPath(id) + "/gpu-usage", Query: attemptQuery(attempt)})
}

// LogQuery selects what Logs copies.
type LogQuery struct {
	Stream  string // stdout (default) or stderr
	Attempt int    // 0: the latest
	// Follow keeps copying until the attempt has finished and its log is
	// drained (or ctx ends).
	Follow bool
}

// Logs copies an attempt's log to w, proxied from the node that ran it.
func (c *Client) Logs(ctx context.Context, id string, q LogQuery, w io.Writer) error {
	v := url.Values{}
	if q.Stream != "" {
		v.Set("stream", q.Stream)
	}
	if q.Follow {
		v.Set("follow", "true")
	}
	if q.Attempt > 0 {
		v.Set("attempt", strconv.Itoa(q.Attempt))
	}
	resp, err := c.send(ctx, Request{Method: http.MethodGet, Path: jobPath(id) + "/logs", Query: v})
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

// ListArtifacts returns the artifacts of a job's attempt (0: its last
// finished one).
func (c *Client) ListArtifacts(ctx context.Context, id string, attempt int) (*ArtifactList, error) {
	return call[ArtifactList](ctx, c, Request{Method: http.MethodGet, Path: jobPath(id) + "/artifacts", Query: attemptQuery(attempt)})
}

// GetArtifact copies one artifact's bytes to w and returns how many.
func (c *Client) GetArtifact(ctx context.Context, id string, attempt int, path string, w io.Writer) (int64, error) {
	p := jobPath(id) + "/artifacts"
	for _, e := range splitPath(path) {
		p += "/" + url.PathEscape(e)
	}
	resp, err := c.send(ctx, Request{Method: http.MethodGet, Path: p, Query: attemptQuery(attempt)})
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

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

func attemptQuery(attempt int) url.Values {
	v := url.Values{}
	if attempt > 0 {
		v.Set("attempt", strconv.Itoa(attempt))
	}
	return v
}

func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }
