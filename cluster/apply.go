package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/certs"
	"github.com/foreman-sched/foreman/fsm"
)

// Apply commits cmd and returns the FSM's result. On the leader it goes
// straight to raft (concurrent calls share one log write and one bbolt
// transaction: BatchApplyCh + MaxAppendEntries); on a follower it is
// forwarded to the leader's POST /v1/internal/apply, retrying across leader
// changes for up to Config.ForwardTimeout.
//
// Errors: ErrNoLeader (nothing was sent; safe to retry), ErrIndeterminate
// (wrapping raft.ErrLeadershipLost, raft.ErrRaftShutdown or a transport
// error after the request was sent: it may have committed), ctx errors, or
// the command's own refusal (Result.Err, which wraps an fsm sentinel and is
// returned together with the Result). A command needing a feature that some
// server lacks (features.go) is refused before anything is sent, with an
// error wrapping fsm.ErrFeatureHeld.
func (n *Node) Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	select {
	case <-n.closing:
		return nil, ErrShutdown
	default:
	}
	// The node that takes the request refuses it, and the leader again for
	// a forwarded one (its gossip view may be newer).
	if err := n.checkFeatures(cmd); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ForwardTimeout)
	defer cancel()
	body, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	backoff := 10 * time.Millisecond
	for {
		res, err := n.applyOnce(ctx, body)
		if !errors.Is(err, errRetry) {
			return res, err
		}
		select {
		case <-ctx.Done():
			if errors.Is(err, ErrNoLeader) || n.leaderHTTP() == "" {
				return nil, fmt.Errorf("%w: %v", ErrNoLeader, ctx.Err())
			}
			return nil, fmt.Errorf("%w: %v", ErrNotLeader, ctx.Err())
		case <-n.closing:
			return nil, ErrShutdown
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// errRetry marks an attempt that did not reach raft and may be retried.
var errRetry = errors.New("retry")

func (n *Node) applyOnce(ctx context.Context, body []byte) (*fsm.Result, error) {
	if n.IsLeader() {
		return n.applyBytes(ctx, body)
	}
	addr := n.leaderHTTP()
	if addr == "" {
		return nil, fmt.Errorf("%w: %w", errRetry, ErrNoLeader)
	}
	return n.forward(ctx, addr, body)
}

// applyLocal applies on this node, which must be the leader.
func (n *Node) applyLocal(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	if err := n.checkFeatures(cmd); err != nil {
		return nil, err
	}
	body, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	res, err := n.applyBytes(ctx, body)
	if errors.Is(err, errRetry) {
		return nil, ErrNotLeader
	}
	return res, err
}

func (n *Node) applyBytes(ctx context.Context, body []byte) (*fsm.Result, error) {
	// A restore holds this exclusively (backup.go): a write waits for it
	// and then applies on top of the restored state.
	n.restoreMu.RLock()
	defer n.restoreMu.RUnlock()
	if err := ctx.Err(); err != nil {
		return nil, err // waited out a restore; nothing was sent
	}
	timeout := n.cfg.ForwardTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	start := time.Now()
	f := n.raft.Apply(body, timeout)
	err := n.waitOrClose(f)
	switch {
	case err == nil:
		metrics().commitSeconds.Observe(time.Since(start).Seconds())
	case errors.Is(err, raft.ErrNotLeader):
		// Refused before it was appended: never committed.
		return nil, fmt.Errorf("%w: %w", errRetry, ErrNotLeader)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return nil, fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	default:
		return nil, fmt.Errorf("%w: %w", ErrIndeterminate, err)
	}
	res, ok := f.Response().(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("%w: unexpected apply response %T", ErrIndeterminate, f.Response())
	}
	return res, res.Err
}

// leaderHTTP is the leader's HTTP address, from gossip (or derived from
// its raft address: HTTP is the base port, raft is base+1).
func (n *Node) leaderHTTP() string {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	if m, ok := n.members.get(string(id)); ok && m.HTTPAddr != "" {
		return m.HTTPAddr
	}
	host, port, err := net.SplitHostPort(string(addr))
	if err != nil {
		return ""
	}
	var p int
	fmt.Sscanf(port, "%d", &p)
	return hostPort(host, p-1)
}

// applyResponse is the body of POST /v1/internal/apply.
type applyResponse struct {
	Result *fsm.Result `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
	Code   string      `json:"code,omitempty"`
}

func (n *Node) forward(ctx context.Context, addr string, body []byte) (*fsm.Result, error) {
	var wrote bool
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote = true }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost,
		n.internalURL(addr, "apply"), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/cbor") // an encoded fsm.Command
	req.Header.Set(ForwardedHeader, "1")
	resp, err := n.client.Do(req)
	if err != nil {
		if !wrote {
			return nil, fmt.Errorf("%w: forward to leader %s: %v", errRetry, addr, err)
		}
		return nil, fmt.Errorf("%w: forward to leader %s: %w", ErrIndeterminate, addr, err)
	}
	defer resp.Body.Close()
	var ar applyResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&ar); err != nil {
		return nil, fmt.Errorf("%w: forward to leader %s: status %d: %v", ErrIndeterminate, addr, resp.StatusCode, err)
	}
	if ar.Code == "" && ar.Error == "" {
		if ar.Result == nil {
			return nil, fmt.Errorf("%w: forward to leader %s: empty response", ErrIndeterminate, addr)
		}
		return ar.Result, nil
	}
	rerr := decodeError(ar.Code, ar.Error)
	switch {
	case errors.Is(rerr, ErrNotLeader), errors.Is(rerr, ErrNoLeader):
		return nil, fmt.Errorf("%w: %w", errRetry, rerr)
	case ar.Result != nil:
		ar.Result.Err = rerr
		return ar.Result, rerr
	default:
		return nil, rerr
	}
}

// maxForwardConns bounds a node's open connections to the leader.
const maxForwardConns = 256

// newForwardClient keeps connections to the leader alive: every follower
// write goes to the same host. With tlsStore it speaks https with this
// agent's certificate (see Node.internalURL).
func newForwardClient(bindIP string, network Network, tlsStore *certs.Store) *http.Client {
	d := peerDialer(bindIP, 2*time.Second)
	t := &http.Transport{
		DialContext: func(ctx context.Context, netw, addr string) (net.Conn, error) {
			if !reachable(network, addr) {
				return nil, fmt.Errorf("dial %s: %w", addr, errUnreachable)
			}
			c, err := d.DialContext(ctx, netw, addr)
			if err != nil {
				return nil, err
			}
			return &filteredConn{Conn: c, peer: addr, network: network}, nil
		},
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 512,
		// A burst of forwards waits for a connection rather than opening
		// more than the leader admits from one address (--max-conns-per-ip,
		// 1,024, which every agent on a host shares): beyond it the leader
		// resets new connections, a forward's and any other client's alike.
		MaxConnsPerHost: maxForwardConns,
		IdleConnTimeout: 90 * time.Second,
	}
	if tlsStore != nil {
		t.TLSClientConfig = tlsStore.PeerClientConfig()
		t.TLSHandshakeTimeout = 5 * time.Second
	}
	return &http.Client{Transport: t}
}
