package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/jepsen/checker"
	"github.com/foreman-sched/foreman/jepsen/history"
)

// Client talks to one node.
type Client struct {
	Node string // node name, for the history
	Base string // http://ip:port
	HTTP *http.Client
	// Token, when set, is sent as "Authorization: Bearer" (agents with --acl).
	Token string
}

// New returns a client for one node with a per-request timeout.
func New(node, base string, timeout time.Duration) *Client {
	return NewTLS(node, base, timeout, nil)
}

// NewTLS is New for an https base: tlsCfg trusts the cluster's CA (nil:
// the system roots).
func NewTLS(node, base string, timeout time.Duration, tlsCfg *tls.Config) *Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true, TLSClientConfig: tlsCfg}
	return &Client{Node: node, Base: base, HTTP: &http.Client{Timeout: timeout, Transport: tr}}
}

// Close drops idle connections.
func (c *Client) Close() { c.HTTP.CloseIdleConnections() }

// Error is a non-2xx answer.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("http %d %s: %s", e.Status, e.Code, e.Msg) }

// Classify maps an error to an outcome: a definite 4xx rejection is a fail,
// everything else (transport errors, timeouts, 5xx incl. 503 no_leader,
// lost leadership) is indeterminate.
func Classify(err error) history.Outcome {
	if err == nil {
		return history.OK
	}
	var he *Error
	if errors.As(err, &he) && he.Status >= 400 && he.Status < 500 && he.Status != http.StatusRequestTimeout && he.Status != http.StatusTooManyRequests {
		return history.Fail
	}
	return history.Info
}

func (c *Client) do(ctx context.Context, method, path string, hdr map[string]string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, b, err := c.send(req, 8<<20)
	if resp == nil {
		return 0, err
	}
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error, Code string }
		_ = json.Unmarshal(b, &e)
		if e.Error == "" {
			e.Error = string(bytes.TrimSpace(b[:min(len(b), 200)]))
		}
		return resp.StatusCode, &Error{Status: resp.StatusCode, Code: e.Code, Msg: e.Error}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", path, err)
		}
	}
	return resp.StatusCode, nil
}

// send sends req with the client's token and reads the answer's body, at
// most limit bytes of it. The answer is nil when none came.
func (c *Client) send(req *http.Request, limit int64) (*http.Response, []byte, error) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp, b, err
}

// get is send for a GET of path, answered 200 OK: another status is an
// *Error with the message msg makes of the body.
func (c *Client) get(ctx context.Context, path string, limit int64, msg func(body []byte) string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, b, err := c.send(req, limit)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, &Error{Status: resp.StatusCode, Msg: msg(b)}
	}
	return resp, b, nil
}

// Cancel asks for a job to be cancelled; the status says how it ended
// (409: already terminal).
func (c *Client) Cancel(ctx context.Context, id string) (int, error) {
	return c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, nil, nil)
}

// NodeDown declares a client agent dead (an operator's `foreman node
// down`), whatever its real state.
func (c *Client) NodeDown(ctx context.Context, name string) (int, error) {
	return c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(name)+"/down", nil, nil, nil)
}

// Submit posts a job spec with an idempotency key.
func (c *Client) Submit(ctx context.Context, spec any, key string) (id string, duplicate bool, err error) {
	var out api.SubmitResponse
	_, err = c.do(ctx, http.MethodPost, "/v1/jobs", map[string]string{"Idempotency-Key": key}, spec, &out)
	if err == nil && out.ID == "" {
		err = fmt.Errorf("submit: empty id in answer")
	}
	return out.ID, out.Duplicate, err
}

// ErrNotFound is a 404 for a job.
var ErrNotFound = errors.New("job not found")

// Job reads a job, consistently (through the leader) when consistent is set.
func (c *Client) Job(ctx context.Context, id string, consistent bool) (*api.JobDetail, error) {
	p := "/v1/jobs/" + url.PathEscape(id)
	if consistent {
		p += "?consistent=true"
	}
	var v api.JobDetail
	st, err := c.do(ctx, http.MethodGet, p, nil, nil, &v)
	if st == http.StatusNotFound {
		return nil, ErrNotFound
	}
	return &v, err
}

// ListJobs pages through every job (newest first).
func (c *Client) ListJobs(ctx context.Context) ([]checker.FinalJob, error) {
	var all []checker.FinalJob
	err := c.eachJob(ctx, false, func(j *api.Job) {
		all = append(all, checker.FinalJob{ID: j.ID, State: string(j.State), IdempotencyKey: j.IdempotencyKey})
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// eachJob pages through every job (newest first; through the leader when
// consistent) and calls fn with each.
func (c *Client) eachJob(ctx context.Context, consistent bool, fn func(*api.Job)) error {
	q := url.Values{}
	if consistent {
		q.Set("consistent", "true")
	}
	return getPages(ctx, c, "/v1/jobs", q, 10000, "list jobs", func(out *api.JobList) (string, error) {
		for i := range out.Jobs {
			fn(&out.Jobs[i])
		}
		if len(out.Jobs) == 0 {
			return "", nil
		}
		return out.NextCursor, nil
	})
}

// getPages GETs path?q one page of 500 at a time, each read as a T: page
// takes it and returns the next cursor ("" after the last page). After
// maxPages pages it gives up, naming the listing (what).
func getPages[T any](ctx context.Context, c *Client, path string, q url.Values, maxPages int, what string, page func(*T) (string, error)) error {
	q.Set("limit", "500")
	for range maxPages {
		var out T
		if _, err := c.do(ctx, http.MethodGet, path+"?"+q.Encode(), nil, nil, &out); err != nil {
			return err
		}
		next, err := page(&out)
		if err != nil || next == "" {
			return err
		}
		q.Set("cursor", next)
	}
	return fmt.Errorf("%s: too many pages", what)
}

// Raft reads this node's raft view (Leader: the leader's name, "" when
// it knows none).
func (c *Client) Raft(ctx context.Context) (api.RaftInfo, error) {
	var ri api.RaftInfo
	_, err := c.do(ctx, http.MethodGet, "/v1/cluster/raft", nil, nil, &ri)
	return ri, err
}

// Hash reads /v1/cluster/hash.
func (c *Client) Hash(ctx context.Context) checker.NodeHash {
	var h checker.NodeHash
	if _, err := c.do(ctx, http.MethodGet, "/v1/cluster/hash", nil, nil, &h); err != nil {
		return checker.NodeHash{Node: c.Node, Err: err.Error()}
	}
	if h.Node == "" {
		h.Node = c.Node
	}
	return h
}

// Ready reports whether GET /v1/ready answers 2xx.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/v1/ready", nil, nil, nil)
	return err
}

// ACLBootstrap issues the cluster's first (management) token and returns
// its secret.
func (c *Client) ACLBootstrap(ctx context.Context) (string, error) {
	var out api.NewToken
	if _, err := c.do(ctx, http.MethodPost, "/v1/acl/bootstrap", nil, nil, &out); err != nil {
		return "", err
	}
	return out.Secret, nil
}

// ACLCreateToken issues a token with roles (POST /v1/acl/tokens, a
// management token) and returns its secret.
func (c *Client) ACLCreateToken(ctx context.Context, name string, roles ...api.ACLRole) (string, error) {
	var out api.NewToken
	body := api.TokenSpec{Name: name, Roles: roles}
	if _, err := c.do(ctx, http.MethodPost, "/v1/acl/tokens", nil, body, &out); err != nil {
		return "", err
	}
	if out.Secret == "" {
		return "", fmt.Errorf("create token: empty secret in answer")
	}
	return out.Secret, nil
}

// FinalAttempts are a job's attempts as the checkers record them.
func FinalAttempts(as []api.Attempt) []checker.FinalAttempt {
	out := make([]checker.FinalAttempt, 0, len(as))
	for _, a := range as {
		f := checker.FinalAttempt{Attempt: a.Attempt, Node: a.Node, State: string(a.State), FencingToken: a.FencingToken, Reason: a.Reason}
		if a.Task != nil {
			f.Task = &checker.FinalTask{Index: a.Task.Index, Size: a.Task.Size}
		}
		for _, g := range a.GPUs {
			f.GPUs = append(f.GPUs, checker.FinalGPU{UUID: g.UUID, Index: g.Index})
		}
		if s := a.GPUShare; s != nil {
			f.GPUShare = &checker.FinalGPUShare{GPU: checker.FinalGPU{UUID: s.GPU.UUID, Index: s.GPU.Index}, MemoryMiB: s.MemoryMiB}
		}
		out = append(out, f)
	}
	return out
}

// UsageAttempts reads GET /v1/usage?step=total&by=namespace over [since,
// until) through the leader, and sums its rows' attempts; enabled is
// whether accounting is on.
func (c *Client) UsageAttempts(ctx context.Context, since, until time.Time) (enabled bool, attempts int64, err error) {
	q := url.Values{"step": {"total"}, "by": {"namespace"}, "consistent": {"true"},
		"since": {since.UTC().Format(time.RFC3339)}, "until": {until.UTC().Format(time.RFC3339)}}
	var out api.UsageReport
	if _, err := c.do(ctx, http.MethodGet, "/v1/usage?"+q.Encode(), nil, nil, &out); err != nil {
		return false, 0, err
	}
	for _, r := range out.Rows {
		attempts += r.Usage.Attempts
	}
	return out.Enabled, attempts, nil
}
