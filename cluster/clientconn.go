package cluster

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
)

// What a client (an agent outside raft) needs to reach the servers: their
// URLs, its own address and an HTTP client that dials from its bind IP.

// ServerURLs maps --join entries ("HOST" or "HOST:BASE") onto the servers'
// base URLs (the HTTP port is BASE).
func ServerURLs(join []string, tls bool) ([]string, error) {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	var out []string
	for _, j := range join {
		gossip, err := joinAddr(j)
		if err != nil {
			return nil, fmt.Errorf("--join %q: %w", j, err)
		}
		host, p, _ := net.SplitHostPort(gossip)
		port, _ := strconv.Atoi(p)
		out = append(out, scheme+hostPort(host, port-2))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--join: a client needs at least one server to join")
	}
	return out, nil
}

// HTTPAdvertise is the host:port others reach this agent's HTTP port at.
func (c *Config) HTTPAdvertise() (string, error) {
	ip, err := c.advertiseIP()
	if err != nil {
		return "", err
	}
	return hostPort(ip, c.Port), nil
}

// BindIP is the IP this agent's listeners bind to.
func (c *Config) BindIP() string { return c.bindIP() }

// NewPeerClient is an HTTP client for calls to other agents' internal
// endpoints: it dials from the bind IP and, with c.TLS, presents this
// agent's certificate. It sets no overall timeout (work streams are long).
func NewPeerClient(c *Config) *http.Client { return newForwardClient(c.bindIP(), c.Network, c.TLS) }
