package api

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultAddress is where a client looks for an agent when neither
// Config.Address nor FOREMAN_ADDR names one.
const DefaultAddress = "http://127.0.0.1:7070"

// Environment variables NewClient reads for the Config fields left empty.
const (
	EnvAddress    = "FOREMAN_ADDR"
	EnvToken      = "FOREMAN_TOKEN"
	EnvNamespace  = "FOREMAN_NAMESPACE"
	EnvCACert     = "FOREMAN_CACERT"
	EnvClientCert = "FOREMAN_CLIENT_CERT"
	EnvClientKey  = "FOREMAN_CLIENT_KEY"
)

// Retry defaults (Config.MaxRetries, Config.MaxRetryWait).
const (
	DefaultMaxRetries   = 8
	DefaultMaxRetryWait = 30 * time.Second
)

const (
	headerIdempotencyKey = "Idempotency-Key"
	headerLastEventID    = "Last-Event-ID"
	headerRequestID      = "X-Request-ID"
)

// Config tunes a Client. The zero value talks to FOREMAN_ADDR (else
// DefaultAddress) with the environment's token, namespace and TLS files.
type Config struct {
	// Address is "http://host:port", "https://host:port" or "host:port".
	Address string
	// Token is sent as "Authorization: Bearer <token>".
	Token string
	// Namespace is sent as ?namespace= ("": the server's default).
	Namespace string
	// CACert, ClientCert and ClientKey are PEM files for an https agent.
	// Ignored when HTTPClient is set.
	CACert, ClientCert, ClientKey string
	// HTTPClient replaces the default one, which has no overall timeout
	// (log follows and the event stream last): bound calls with their
	// context.
	HTTPClient *http.Client
	// MaxRetries bounds the retries of one call (0: DefaultMaxRetries;
	// negative: none).
	MaxRetries int
	// MaxRetryWait caps one wait between tries, Retry-After included (0:
	// DefaultMaxRetryWait).
	MaxRetryWait time.Duration
	// FailFast returns at once, instead of retrying, when no server
	// answered or the outcome is unknown (a refused or broken connection,
	// 502, 503, 504): for interactive tools, whose user decides. A 429
	// (the server took nothing) is still waited for and sent again.
	FailFast bool
}

// Client talks to one agent's REST API (docs/api.md). It is safe for
// concurrent use. Every call takes a context; a call retries on its own
// only where a retry cannot do a thing twice:
//
//   - 429 overloaded (the server took nothing): every call, after the
//     server's Retry-After;
//   - a refused connection (nothing was sent): every call;
//   - 502, 503, 504 and a connection that broke after the request went
//     out (the outcome is unknown): reads, and the writes that carry an
//     idempotency key: SubmitJob, SubmitJobs and SubmitWorkflow make one
//     when the caller gives none, so a resent submit answers with the
//     first job instead of making a second.
//
// Without Retry-After the wait doubles from 250 ms up to 5 s (±20%).
type Client struct {
	base       *url.URL
	token      string
	namespace  string
	consistent bool
	hc         *http.Client
	retries    int
	maxWait    time.Duration
	failFast   bool
}

// NewClient returns a client for cfg.
func NewClient(cfg Config) (*Client, error) {
	or := func(v, env string) string {
		if v == "" {
			return os.Getenv(env)
		}
		return v
	}
	addr := or(cfg.Address, EnvAddress)
	if addr == "" {
		addr = DefaultAddress
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("address %q: want http://host:port or https://host:port", addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{
		base:      u,
		token:     or(cfg.Token, EnvToken),
		namespace: or(cfg.Namespace, EnvNamespace),
		hc:        cfg.HTTPClient,
		retries:   cfg.MaxRetries,
		maxWait:   cfg.MaxRetryWait,
		failFast:  cfg.FailFast,
	}
	switch {
	case c.retries == 0:
		c.retries = DefaultMaxRetries
	case c.retries < 0:
		c.retries = 0
	}
	if c.maxWait <= 0 {
		c.maxWait = DefaultMaxRetryWait
	}
	if c.hc == nil {
		tlsCfg, err := TLSConfig(or(cfg.CACert, EnvCACert), or(cfg.ClientCert, EnvClientCert), or(cfg.ClientKey, EnvClientKey))
		if err != nil {
			return nil, err
		}
		c.hc = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       tlsCfg,
			TLSHandshakeTimeout:   10 * time.Second,
			MaxIdleConnsPerHost:   32,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
		}}
	}
	return c, nil
}

// TLSConfig is the TLS config of an API client: the CA (PEM file) to
// trust and the certificate and key to present. Nil when all three are
// empty (the system's roots, no certificate).
func TLSConfig(caCert, clientCert, clientKey string) (*tls.Config, error) {
	if caCert == "" && clientCert == "" && clientKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caCert != "" {
		b, err := os.ReadFile(caCert)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA certificate %s: no PEM certificate in the CA file", caCert)
		}
		cfg.RootCAs = pool
	}
	switch {
	case clientCert != "" && clientKey != "":
		c, err := tls.LoadX509KeyPair(clientCert, clientKey)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	case clientCert != "" || clientKey != "":
		return nil, errors.New("client certificate: set both the certificate and the key")
	}
	return cfg, nil
}

// Address is the base URL the client talks to.
func (c *Client) Address() string { return c.base.String() }

// Namespace is the namespace the client acts in ("": the server's default).
func (c *Client) Namespace() string { return c.namespace }

// WithNamespace returns a client like c that acts in namespace ns.
func (c *Client) WithNamespace(ns string) *Client {
	cc := *c
	cc.namespace = ns
	return &cc
}

// Consistent returns a client like c whose reads go through the leader,
// which first applies everything committed (?consistent=true): a read
// after a write sees it, on any node. Without it a follower may lag the
// leader by a few entries.
func (c *Client) Consistent() *Client {
	cc := *c
	cc.consistent = true
	return &cc
}

// Health returns nil when the agent process answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, Request{Method: http.MethodGet, Path: "/v1/health"}, nil)
}

// Ready returns nil when the agent knows a leader and has caught up.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, Request{Method: http.MethodGet, Path: "/v1/ready"}, nil)
}

// Request is a call of a route this package has no method for, or one
// sent differently (a submit without an idempotency key, a raw stream).
// Do and Open send it with the Client's address, token, namespace and
// retries.
type Request struct {
	Method string
	// Path is the route, escaped: "/v1/namespaces/" + url.PathEscape(ns).
	Path  string
	Query url.Values
	// Body is nil, []byte (JSON as it is), an io.Reader (streamed as
	// application/octet-stream, once: it is never sent again), or a value
	// encoded as JSON.
	Body   any
	Header http.Header
	// Idempotent marks a write that is safe to send again when its
	// outcome is unknown (it carries an idempotency key, or sets a state
	// rather than changing it). GET and HEAD always are.
	Idempotent bool

	// read adds ?consistent=true on a Consistent client.
	read bool
}

// Do sends r and decodes a 2xx JSON answer into out (when non-nil); a
// non-2xx answer is an *Error.
func (c *Client) Do(ctx context.Context, r Request, out any) error { return c.do(ctx, r, out) }

// Open sends r and returns its 2xx answer unread, for a stream (a log,
// a snapshot, the raw event stream); the caller closes its body.
func (c *Client) Open(ctx context.Context, r Request) (*http.Response, error) { return c.send(ctx, r) }

// call sends r and returns its 2xx JSON answer decoded into a T.
func call[T any](ctx context.Context, c *Client, r Request) (*T, error) {
	var out T
	if err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// callList is call for an answer that is one list under key:
// {"<key>": [...]}.
func callList[T any](ctx context.Context, c *Client, r Request, key string) ([]T, error) {
	var out map[string]json.RawMessage
	if err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	var items []T
	if raw, ok := out[key]; ok {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("%s %s: decoding the answer: %w", r.Method, r.Path, err)
		}
	}
	return items, nil
}

// do sends r and decodes a 2xx JSON answer into out (when non-nil).
func (c *Client) do(ctx context.Context, r Request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", r.Method, r.Path, err)
	}
	return nil
}

// send returns a 2xx response, whose body the caller closes, retrying as
// the Client's doc says.
func (c *Client) send(ctx context.Context, r Request) (*http.Response, error) {
	target, err := c.target(r)
	if err != nil {
		return nil, err
	}
	var body []byte
	var stream io.Reader
	switch v := r.Body.(type) {
	case nil:
	case []byte:
		body = v
	case io.Reader:
		stream = v
	default:
		if body, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("%s %s: encoding the request: %w", r.Method, r.Path, err)
		}
	}
	idempotent := r.Idempotent || r.Method == http.MethodGet || r.Method == http.MethodHead
	// One request ID for every try, so the agent's log lines about the
	// retries of one call can be found together.
	reqID := "go-" + randomHex(10)
	if stream != nil {
		return c.sendOnce(ctx, r, target, stream, "application/octet-stream", reqID)
	}
	for try := 0; ; try++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		resp, err := c.sendOnce(ctx, r, target, rd, "application/json", reqID)
		if err == nil {
			return resp, nil
		}
		retry, wait := c.retryable(err, idempotent)
		if !retry || try >= c.retries || ctx.Err() != nil {
			return nil, err
		}
		if wait <= 0 {
			wait = backoff(try)
		}
		wait = min(wait, c.maxWait)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// retryable says whether err may be retried and how long the server asked
// to wait (0: not said).
func (c *Client) retryable(err error, idempotent bool) (bool, time.Duration) {
	var ae *Error
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusTooManyRequests:
			return true, ae.RetryAfter
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return idempotent && !c.failFast, ae.RetryAfter
		}
		return false, 0
	}
	var ce *ConnectionError
	if errors.As(err, &ce) {
		return (ce.NotSent || idempotent) && !c.failFast, 0
	}
	return false, 0
}

// backoff is the wait before retry try+1 when the server named none.
func backoff(try int) time.Duration {
	d := 250 * time.Millisecond << min(try, 5)
	d = min(d, 5*time.Second)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// ConnectionError is a request that got no HTTP answer.
type ConnectionError struct {
	Method, Host string
	// NotSent is true when the connection was refused: the server saw
	// nothing. Otherwise the request may have been acted on.
	NotSent bool
	Err     error
}

func (e *ConnectionError) Error() string { return fmt.Sprintf("%s %s: %v", e.Method, e.Host, e.Err) }
func (e *ConnectionError) Unwrap() error { return e.Err }

func (c *Client) target(r Request) (string, error) {
	u := *c.base
	// The path comes escaped: keep it so, or "a b" would go as a%2520b.
	u.RawPath = u.EscapedPath() + r.Path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return "", fmt.Errorf("path %q: %w", r.Path, err)
	}
	u.Path = p
	q := url.Values{}
	for k, vs := range r.Query {
		q[k] = append([]string(nil), vs...)
	}
	if c.namespace != "" && q.Get("namespace") == "" {
		q.Set("namespace", c.namespace)
	}
	if r.read && c.consistent {
		q.Set("consistent", "true")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// sendOnce sends one try; body is nil for a request without one.
func (c *Client) sendOnce(ctx context.Context, r Request, target string, body io.Reader, ctype, reqID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, target, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(headerRequestID, reqID)
	req.Header.Set("User-Agent", "foreman-go-api")
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", r.Method, c.base.Host, ctx.Err())
		}
		var oe *net.OpError
		notSent := errors.As(err, &oe) && oe.Op == "dial"
		return nil, &ConnectionError{Method: r.Method, Host: c.base.Host, NotSent: notSent, Err: err}
	}
	upgraded := resp.StatusCode == http.StatusSwitchingProtocols && r.Header.Get("Upgrade") != ""
	if resp.StatusCode/100 != 2 && !upgraded {
		defer resp.Body.Close()
		e := decodeError(resp)
		if e.RequestID == "" {
			e.RequestID = reqID
		}
		return nil, e
	}
	return resp, nil
}

// keyHeader takes a spec's idempotency key out of it (the key travels as
// a header, not in the body), making one when it has none, and returns
// the header that carries it.
func keyHeader(key *string) http.Header {
	k := *key
	if k == "" {
		k = newKey()
	}
	*key = ""
	return http.Header{headerIdempotencyKey: {k}}
}

// newKey makes an idempotency key for a submit the caller gave none.
func newKey() string { return "go-" + randomHex(16) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
