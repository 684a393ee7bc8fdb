package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+p+"?"+q.Encode(), nil)
	if err != nil {
		return nil, "", err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", &Error{Status: resp.StatusCode, Msg: strings.TrimSpace(string(b[:min(len(b), 300)]))}
	}
	return b, resp.Header.Get(hdr), nil
}

// Metric reads one unlabelled gauge or counter from the node's
// /v1/metrics (Prometheus text format).
func (c *Client) Metric(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/metrics", nil)
	if err != nil {
		return 0, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, &Error{Status: resp.StatusCode, Msg: "metrics"}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not exposed", name)
}
