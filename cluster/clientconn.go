package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"
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

// KeepStreaming keeps a client's work stream open until ctx ends: it
// holds one server's stream (stream returns when it ends; healthy: it
// delivered a frame, so the backoff starts over; retry: the least wait
// the server asked for) and then the next server's, starting from a
// random one to spread the clients. Between two it waits a full-jitter
// backoff from 100 ms doubling to 5 s, or retry when longer; ended, when
// set, hears how the stream ended and the wait. A stream that ends with
// a MovedTo (the server handed the client to another, a planned move of
// clientspread.go) is followed at once by one to the server it names; a
// move that fails goes on through the list.
func KeepStreaming(ctx context.Context, servers []string, stream func(ctx context.Context, server string) (healthy bool, retry time.Duration, err error),
	ended func(server string, err error, wait time.Duration)) error {
	next := rand.IntN(len(servers))
	backoff := 100 * time.Millisecond
	var moveTo MovedTo
	for {
		server := string(moveTo)
		if server == "" {
			server = servers[next%len(servers)]
			next++
		}
		healthy, retry, err := stream(ctx, server)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if healthy {
			backoff = 100 * time.Millisecond
		}
		if moveTo = ""; errors.As(err, &moveTo) && moveTo != "" {
			if ended != nil {
				ended(server, err, 0)
			}
			continue
		}
		wait := max(retry, time.Duration(rand.Int64N(int64(backoff)+1)))
		if ended != nil {
			ended(server, err, wait)
		}
		backoff = min(2*backoff, 5*time.Second)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// MovedTo ends a client's stream whose server handed the client to the
// server it holds (a base URL, from a move frame): KeepStreaming opens
// the next stream there at once.
type MovedTo string

func (m MovedTo) Error() string { return "handed to " + string(m) }
