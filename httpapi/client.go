package httpapi

import (
	"context"
	"crypto/tls"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/certs"
)

// DefaultAddr is where the client looks for an agent without FOREMAN_ADDR.
const DefaultAddr = api.DefaultAddress

// Environment variables the client reads (package api's).
const (
	EnvAddr  = api.EnvAddress
	EnvToken = api.EnvToken
	// EnvNamespace is the namespace requests act in when ClientOptions
	// leaves it empty ("" = the server's default namespace).
	EnvNamespace = api.EnvNamespace
	// EnvCACert names the CA certificate (PEM) to verify an https agent
	// with; empty uses the system's roots.
	EnvCACert = api.EnvCACert
	// EnvClientCert and EnvClientKey name a client certificate and key
	// to present (needed when agents require one).
	EnvClientCert = api.EnvClientCert
	EnvClientKey  = api.EnvClientKey
)

// APIError is a non-2xx reply, decoded from the JSON error body: the
// public client's error type (api.Error: Status, Code, Message, Field,
// RetryAfter, RequestID).
type APIError = api.Error

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
//
// Deprecated: programs use package api (github.com/foreman-sched/foreman/api),
// which does not import the server. Client is a thin layer over api.Client
// (its transport, errors and TLS) that keeps the fsm- and httpapi-typed
// methods the CLI and foreman bench print and count with. It fails fast
// (api.Config.FailFast): a refused connection, a 5xx or a broken
// connection is the caller's to retry; a 429 is waited for as the server
// asks, while ctx allows.
type Client struct {
	api  *api.Client
	host string
}

// NewClient returns a client for the agent at addr ("http://host:port",
// or "host:port"); an empty addr reads FOREMAN_ADDR, then DefaultAddr.
func NewClient(addr string, opts ClientOptions) (*Client, error) {
	hc := opts.HTTPClient
	if hc == nil {
		tlsCfg, err := ClientTLS(opts.CACert, opts.ClientCert, opts.ClientKey)
		if err != nil {
			return nil, err
		}
		hc = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       tlsCfg,
			TLSHandshakeTimeout:   10 * time.Second,
			MaxIdleConnsPerHost:   32,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
		}}
	}
	ac, err := api.NewClient(api.Config{
		Address:    addr,
		Token:      opts.Token,
		Namespace:  opts.Namespace,
		HTTPClient: hc,
		// 429s are sent again until ctx ends, as they always were here.
		MaxRetries:   math.MaxInt32,
		MaxRetryWait: maxRetryAfter,
		FailFast:     true,
	})
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(ac.Address()) // api.NewClient parsed it
	return &Client{api: ac, host: u.Host}, nil
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
func (c *Client) Addr() string { return c.api.Address() }

// do sends a request with an optional JSON body and decodes a JSON reply
// into out (when non-nil). Non-2xx replies become *APIError. The status
// returned is 200 for any 2xx.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any, hdr http.Header) (int, error) {
	if err := c.api.Do(ctx, api.Request{Method: method, Path: path, Query: query, Body: in, Header: hdr}, out); err != nil {
		return 0, err
	}
	return http.StatusOK, nil
}

// send returns a 2xx response (whose body the caller closes) or an error.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, in any, hdr http.Header) (*http.Response, error) {
	return c.api.Open(ctx, api.Request{Method: method, Path: path, Query: query, Body: in, Header: hdr})
}

// maxRetryAfter caps how long the client waits on one 429.
const maxRetryAfter = 30 * time.Second

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

// Namespace is the namespace the client sends ("" = the server's default).
func (c *Client) Namespace() string { return c.api.Namespace() }
