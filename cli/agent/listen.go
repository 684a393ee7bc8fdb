package agent

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/certs"
	"github.com/foreman-sched/foreman/cluster"
)

// Limits of the HTTP server (docs/security.md, "Hardening").
const (
	// maxHeaderBytes bounds a request's header block (Go's default is 1 MiB).
	maxHeaderBytes = 64 << 10
	// readHeaderTimeout bounds how long a client may take to send headers
	// (slowloris); bodies are bounded by httpapi's MaxBodyBytes instead of a
	// read timeout, so long uploads (snapshot restores) still work.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes keep-alive connections nobody uses.
	idleTimeout = 2 * time.Minute
	// DefaultMaxConnsPerIP is --max-conns-per-ip's default: enough for a
	// bench client with hundreds of connections plus the other agents of a
	// cluster on one host (they all proxy from 127.0.0.1), small enough that
	// one client cannot take every file descriptor.
	DefaultMaxConnsPerIP = 1024
)

// newHTTPServer is the agent's HTTP server with every limit set.
func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// TLS handshake failures (a plain-HTTP client, a certificate of
		// another CA) are logged by the server at this level; they never
		// carry key material.
		ErrorLog: slog.NewLogLogger(logger.With("component", "http").Handler(), slog.LevelWarn),
	}
}

// wrapListener applies the per-client connection limit and, with TLS, the
// API's TLS config (client certificates verified when given, required with
// requireClientCert).
func wrapListener(ln net.Listener, maxPerIP int, store *certs.Store, requireClientCert bool, logger *slog.Logger) net.Listener {
	if maxPerIP > 0 {
		ln = newPerIPListener(ln, maxPerIP, logger)
	}
	if store != nil {
		ln = tls.NewListener(ln, store.HTTPServerConfig(requireClientCert))
	}
	return ln
}

// agentOnly guards the paths only agents may call when TLS is on (the
// internal raft-forwarding endpoints guard themselves: cluster.Node's
// InternalHandler); without TLS it is the identity.
func agentOnly(h http.Handler, tlsOn bool) http.Handler {
	if !tlsOn {
		return h
	}
	return cluster.RequireAgentCert(h)
}

// perIPListener closes connections beyond max open at once from one
// remote IP, so one client cannot exhaust the agent's file descriptors.
// golang.org/x/net/netutil.LimitListener is global (one noisy client would
// lock everyone out) and blocks in Accept; this refuses at once. Refusals
// are logged (at most once a minute, naming the address refused last): the
// peer only sees its connection reset, and an agent refusing its own
// cluster's forwards (every agent on a host shares its IP) must be findable.
type perIPListener struct {
	net.Listener
	max    int
	logger *slog.Logger
	mu     sync.Mutex
	open   map[string]int
	warned time.Time // the last refusal logged
}

// refusalLogEvery bounds the refusal warnings.
const refusalLogEvery = time.Minute

func newPerIPListener(ln net.Listener, max int, logger *slog.Logger) *perIPListener {
	return &perIPListener{Listener: ln, max: max, logger: logger, open: map[string]int{}}
}

func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		if l.open[ip] >= l.max {
			warn := time.Since(l.warned) >= refusalLogEvery
			if warn {
				l.warned = time.Now()
			}
			l.mu.Unlock()
			if warn {
				l.logger.Warn("connection refused: too many open from one address (--max-conns-per-ip; logged at most once a minute)",
					"component", "http", "remote", ip, "open", l.max)
			}
			c.Close()
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *perIPListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return host
}

type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
