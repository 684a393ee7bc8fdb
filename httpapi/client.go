package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/certs"
)

// DefaultAddr is where the client looks for an agent without FOREMAN_ADDR.
const DefaultAddr = "http://127.0.0.1:7070"

// Environment variables the client reads.
const (
	EnvAddr  = "FOREMAN_ADDR"
	EnvToken = "FOREMAN_TOKEN"
	// EnvNamespace is the namespace requests act in when ClientOptions
	// leaves it empty ("" = the server's default namespace).
	EnvNamespace = "FOREMAN_NAMESPACE"
	// EnvCACert names the CA certificate (PEM) to verify an https agent
	// with; empty uses the system's roots.
	EnvCACert = "FOREMAN_CACERT"
	// EnvClientCert and EnvClientKey name a client certificate and key
	// to present (needed when agents require one).
	EnvClientCert = "FOREMAN_CLIENT_CERT"
	EnvClientKey  = "FOREMAN_CLIENT_KEY"
)

// APIError is a non-2xx reply, decoded from the JSON error body.
type APIError struct {
	Status  int    // HTTP status
	Code    string // ErrorBody.Code, e.g. "invalid", "not_found", "no_leader"
	Message string // ErrorBody.Error
	// RetryAfter is the server's Retry-After on a 429 (zero otherwise).
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	return e.Message
}

// ClientOptions tune a Client. The zero value works.
type ClientOptions struct {
	// Token is sent as "Authorization: Bearer <token>"; empty reads
	// FOREMAN_TOKEN.
	Token string
	// Namespace is sent as ?namespace= on every request that has none
	// ("": FOREMAN_NAMESPACE, else the server's default).
	Namespace string
	// HTTPClient replaces the default client (which has no overall timeout,
	// so log follows can last; bound calls with their context instead).
	HTTPClient *http.Client
	// CACert, ClientCert and ClientKey are PEM files for https agents;
	// each empty one reads its FOREMAN_CACERT, FOREMAN_CLIENT_CERT,
	// FOREMAN_CLIENT_KEY. Ignored when HTTPClient is set.
	CACert, ClientCert, ClientKey string
}

// Client talks to one agent's API. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	token     string
	namespace string
	hc        *http.Client
}

// NewClient returns a client for the agent at addr ("http://host:port",
// or "host:port"); an empty addr reads FOREMAN_ADDR, then DefaultAddr.
func NewClient(addr string, opts ClientOptions) (*Client, error) {
	if addr == "" {
		addr = os.Getenv(EnvAddr)
	}
	if addr == "" {
		addr = DefaultAddr
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("address %q: want http://host:port", addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, token: opts.Token, hc: opts.HTTPClient}
	if c.token == "" {
		c.token = os.Getenv(EnvToken)
	}
	c.namespace = opts.Namespace
	if c.namespace == "" {
		c.namespace = os.Getenv(EnvNamespace)
	}
	if c.hc == nil {
		tlsCfg, err := ClientTLS(opts.CACert, opts.ClientCert, opts.ClientKey)
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

// ClientTLS is the TLS config of a client of the API: the CA to trust and
// the certificate to present, each empty argument read from its
// environment variable (EnvCACert, EnvClientCert, EnvClientKey). Nil when
// none is set (the system's roots, no certificate).
func ClientTLS(caCert, clientCert, clientKey string) (*tls.Config, error) {
	or := func(v, env string) string {
		if v == "" {
			return os.Getenv(env)
		}
		return v
	}
	caCert, clientCert, clientKey = or(caCert, EnvCACert), or(clientCert, EnvClientCert), or(clientKey, EnvClientKey)
	if caCert == "" && clientCert == "" && clientKey == "" {
		return nil, nil
	}
	return certs.ClientConfig(caCert, clientCert, clientKey)
}

// Addr is the base URL the client talks to.
func (c *Client) Addr() string { return c.base.String() }

// do sends a request with an optional JSON body and decodes a JSON reply
// into out (when non-nil). Non-2xx replies become *APIError.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any, hdr http.Header) (int, error) {
	resp, err := c.send(ctx, method, path, query, in, hdr)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: decoding the reply: %w", method, path, err)
	}
	return resp.StatusCode, nil
}

// send returns a 2xx response (whose body the caller closes) or an error.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, in any, hdr http.Header) (*http.Response, error) {
	u := *c.base
	// path comes escaped (names go through url.PathEscape): keep it so,
	// or "a b" would be sent as a%2520b.
	u.RawPath = u.EscapedPath() + path
	if p, err := url.PathUnescape(u.RawPath); err == nil {
		u.Path = p
	}
	if c.namespace != "" && query.Get("namespace") == "" {
		query = cloneValues(query)
		query.Set("namespace", c.namespace)
	}
	u.RawQuery = query.Encode()
	var body io.Reader
	ctype := "application/json"
	switch v := in.(type) {
	case nil:
	case io.Reader: // a file streamed as it is (a snapshot)
		body, ctype = v, "application/octet-stream"
	case []byte:
		body = bytes.NewReader(v)
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encoding the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	if in == nil {
		ctype = ""
	}
	for {
		resp, err := c.sendOnce(ctx, method, u.String(), body, ctype, hdr)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
			return resp, err
		}
		br, rewindable := body.(*bytes.Reader)
		if body != nil && !rewindable {
			return nil, err // a streamed body (a snapshot) cannot be sent again
		}
		// 429 means the server took nothing (httpapi/overload.go): wait as
		// it asks and send the same request again, while ctx allows.
		wait := ae.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, err
		}
		t := time.NewTimer(min(wait, maxRetryAfter))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		if br != nil {
			br.Seek(0, io.SeekStart)
		}
	}
}

// maxRetryAfter caps how long the client waits on one 429.
const maxRetryAfter = 30 * time.Second

// sendOnce sends one request; ctype is empty for a request without a body.
func (c *Client) sendOnce(ctx context.Context, method, target string, body io.Reader, ctype string, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %s: %w", method, c.base.Host, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeAPIError(resp)
	}
	return resp, nil
}

func decodeAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{Status: resp.StatusCode}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	var body ErrorBody
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		e.Code, e.Message = body.Code, body.Error
	} else {
		e.Message = strings.TrimSpace(string(b))
		if e.Message == "" {
			e.Message = fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		}
	}
	return e
}

// Health returns nil when the agent process answers.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/v1/health", nil, nil, nil, nil)
	return err
}

// Ready returns nil when the agent knows a leader and has caught up.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/v1/ready", nil, nil, nil, nil)
	return err
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// Namespace is the namespace the client sends ("" = the server's default).
func (c *Client) Namespace() string { return c.namespace }
