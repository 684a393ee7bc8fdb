package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// JobOutputs reads a job's attempts with where their outputs are (issue
// 25), consistently (through the leader).
func (c *Client) JobOutputs(ctx context.Context, id string) (state string, attempts []api.Attempt, err error) {
	var v api.JobDetail
	_, err = c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"?consistent=true", nil, nil, &v)
	return string(v.Job.State), v.Attempts, err
}

// FSMOutputs is an attempt's outputs record as the state machine holds it
// (the checkers' type); api's carries the same JSON.
func FSMOutputs(o *api.Outputs) (*fsm.Outputs, error) {
	if o == nil {
		return nil, nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var out fsm.Outputs
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Output downloads one file of an attempt through the API: an artifact
// ("artifacts/<path>") or a log ("logs/stdout", "logs/stderr"). source is
// the answer's X-Foreman-Artifact-Source or X-Foreman-Log-Source.
func (c *Client) Output(ctx context.Context, id string, attempt int, name string) (body []byte, source string, err error) {
	q := url.Values{"attempt": {strconv.Itoa(attempt)}}
	var p, hdr string
	switch {
	case strings.HasPrefix(name, "artifacts/"):
		var parts []string
		for _, el := range strings.Split(strings.TrimPrefix(name, "artifacts/"), "/") {
			parts = append(parts, url.PathEscape(el))
		}
		p, hdr = "/v1/jobs/"+url.PathEscape(id)+"/artifacts/"+strings.Join(parts, "/"), "X-Foreman-Artifact-Source"
	case name == fsm.OutputStdout || name == fsm.OutputStderr:
		q.Set("stream", strings.TrimPrefix(name, "logs/"))
		p, hdr = "/v1/jobs/"+url.PathEscape(id)+"/logs", "X-Foreman-Log-Source"
	default:
		return nil, "", fmt.Errorf("no API read for %q", name)
	}
	resp, b, err := c.get(ctx, p+"?"+q.Encode(), 64<<20, func(b []byte) string { return strings.TrimSpace(string(b[:min(len(b), 300)])) })
	if err != nil {
		return nil, "", err
	}
	return b, resp.Header.Get(hdr), nil
}

// Metric reads one unlabelled gauge or counter from the node's
// /v1/metrics (Prometheus text format).
func (c *Client) Metric(ctx context.Context, name string) (float64, error) {
	_, b, err := c.get(ctx, "/v1/metrics", 16<<20, func([]byte) string { return "metrics" })
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not exposed", name)
}
