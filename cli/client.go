package cli

import (
	"crypto/tls"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
)

// ClientConfig is how a command reaches the API: its token, namespace and
// TLS files (each empty one read from its FOREMAN_* variable), or an
// http.Client of its own.
type ClientConfig struct {
	Token, Namespace              string
	CACert, ClientCert, ClientKey string
	// HTTPClient replaces the default one (the TLS files are then unused).
	HTTPClient *http.Client
}

// maxRetryWait caps how long a command waits on one 429.
const maxRetryWait = 30 * time.Second

// NewClient is the API client of the commands (package api, the public
// client) for the agent at addr ("": FOREMAN_ADDR, else
// api.DefaultAddress), with api's default transport unless cfg brings
// an http.Client. It fails fast (api.Config.FailFast): a refused
// connection, a 5xx or a broken connection is the user's to retry; a
// 429 is waited for as the server asks, while the command's context
// allows.
func NewClient(addr string, cfg ClientConfig) (*api.Client, error) {
	return api.NewClient(api.Config{
		Address:    addr,
		Token:      cfg.Token,
		Namespace:  cfg.Namespace,
		CACert:     cfg.CACert,
		ClientCert: cfg.ClientCert,
		ClientKey:  cfg.ClientKey,
		HTTPClient: cfg.HTTPClient,
		// 429s are sent again until the context ends.
		MaxRetries:   math.MaxInt32,
		MaxRetryWait: maxRetryWait,
		FailFast:     true,
	})
}

// clientTLS is the TLS config of cfg's files, each empty one read from its
// environment variable (as api.NewClient reads them); nil when none is set
// (the system's roots, no certificate).
func clientTLS(cfg ClientConfig) (*tls.Config, error) {
	or := func(v, env string) string {
		if v == "" {
			return os.Getenv(env)
		}
		return v
	}
	return api.TLSConfig(or(cfg.CACert, api.EnvCACert), or(cfg.ClientCert, api.EnvClientCert), or(cfg.ClientKey, api.EnvClientKey))
}

// newClient builds the API client from --addr (the innermost command that
// set it explicitly, then FOREMAN_ADDR, then the default) and the other
// connection flags (ClientOptions).
func newClient(c *ucli.Context) (*api.Client, error) {
	cl, err := NewClient(innermost(c, "addr"), ClientOptions(c))
	if err != nil {
		return nil, Exitf(1, "%v", err)
	}
	return cl, nil
}

// ClientOptions are the connection flags of a command: --token,
// --namespace, --ca-cert, --client-cert and --client-key, each from the
// innermost command that set it ("" falls back to its FOREMAN_*
// variable in NewClient).
func ClientOptions(c *ucli.Context) ClientConfig {
	return ClientConfig{CACert: innermost(c, "ca-cert"), ClientCert: innermost(c, "client-cert"), ClientKey: innermost(c, "client-key"),
		Token: innermost(c, "token"), Namespace: innermost(c, "namespace")}
}

// ClientTLS is the TLS config of --ca-cert, --client-cert, --client-key (or
// their environment variables); nil when none is set. For commands that
// build their own http.Client.
func ClientTLS(c *ucli.Context) (*tls.Config, error) {
	cfg, err := clientTLS(ClientOptions(c))
	if err != nil {
		return nil, Exitf(1, "%v", err)
	}
	return cfg, nil
}

// AsServer re-reads a reply of package api as the server's type of the
// same JSON (httpapi's, with fsm's inside), for the tables and counts
// written on those types' methods (State.Live, Event.Kind, ...). Nothing
// is lost on the way: api's types carry every field the server sends
// (httpapi's TestAPITypesKeepServerJSON). A call's error passes through,
// so a call reads AsServer[httpapi.JobDetail](cl.GetJob(ctx, id)).
func AsServer[T any](reply any, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// innermost is the value of flag from the innermost command that set it
// explicitly ("" when none did; the client then reads the environment).
func innermost(c *ucli.Context, flag string) string {
	for _, x := range c.Lineage() {
		for _, n := range x.LocalFlagNames() {
			if n == flag {
				if v := x.String(flag); v != "" {
					return v
				}
			}
		}
	}
	return ""
}
