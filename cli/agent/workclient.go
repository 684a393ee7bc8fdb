package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/exec"
)

// workClient is the executor's view of its work on a node outside raft
// (issue 23): instead of a local replica it holds one work stream
// (cluster/workstream.go) to one of the servers, and serves the latest
// set it received as exec.Assignments, and the stream's pings as
// exec.LeaderContact (the lease-renewal gate). It moves to another server
// when its stream ends or fails, after a fully jittered, growing backoff
// (or the server's Retry-After), resuming from the highest index it has
// seen so that its view never goes back in time.
type workClient struct {
	node    string
	servers []string // base URLs, e.g. http://10.0.0.5:7070
	hc      *http.Client
	auth    func(http.Header) // the cluster-internal credential; nil adds nothing
	// contact is how long a frame saying "in contact with the leader"
	// keeps the gate open (cluster's LeaderContactTimeout).
	contact time.Duration
	logger  *slog.Logger

	mu          sync.Mutex
	index       uint64
	work        []exec.Assignment
	haveWork    bool
	lastContact time.Time
	server      string // the server of the open stream ("" while none)
	watchers    map[chan struct{}]struct{}
}

func newWorkClient(node string, servers []string, hc *http.Client, auth func(http.Header), contact time.Duration, logger *slog.Logger) *workClient {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &workClient{node: node, servers: servers, hc: hc, auth: auth, contact: contact, logger: logger,
		watchers: map[chan struct{}]struct{}{}}
}

// Watch implements exec.Assignments: the channel gets a signal after each
// new set.
func (c *workClient) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	c.watchers[ch] = struct{}{}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.watchers, ch)
		c.mu.Unlock()
	}
}

// LiveAttempts implements exec.Assignments with the latest set received.
// Before the first one it fails: an empty set would read as "stop
// everything" to an executor re-adopting its attempts after a restart.
func (c *workClient) LiveAttempts(node string) ([]exec.Assignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if node != c.node {
		return nil, fmt.Errorf("this node's work stream is %s's, not %s's", c.node, node)
	}
	if !c.haveWork {
		return nil, errors.New("no work received from a server yet")
	}
	return append([]exec.Assignment(nil), c.work...), nil
}

// InContactWithLeader implements exec.LeaderContact: a frame from a
// server in contact with the leader arrived within the contact timeout.
func (c *workClient) InContactWithLeader() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.lastContact.IsZero() && time.Since(c.lastContact) < c.contact
}

// Server is the server of the open stream, "" while there is none.
func (c *workClient) Server() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server
}

// Run keeps a stream open until ctx ends.
func (c *workClient) Run(ctx context.Context) error {
	next := rand.IntN(len(c.servers)) // spread the clients over the servers
	backoff := 100 * time.Millisecond
	for {
		server := c.servers[next%len(c.servers)]
		next++
		healthy, retryAfter, err := c.stream(ctx, server)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if healthy {
			backoff = 100 * time.Millisecond
		}
		wait := time.Duration(rand.Int64N(int64(backoff) + 1)) // full jitter
		if retryAfter > wait {
			wait = retryAfter
		}
		c.logger.Debug("work stream ended", "server", server, "err", err, "retry_in", wait)
		backoff = min(2*backoff, 5*time.Second)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// stream reads one server's stream until it ends. healthy: it delivered
// at least one frame (the backoff starts over).
func (c *workClient) stream(ctx context.Context, server string) (healthy bool, retryAfter time.Duration, err error) {
	c.mu.Lock()
	index := c.index
	c.mu.Unlock()
	url := fmt.Sprintf("%s%swork/%s?index=%d", server, cluster.InternalPrefix, c.node, index)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, 0, err
	}
	if c.auth != nil {
		c.auth(req.Header)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			retryAfter = time.Duration(s) * time.Second
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return false, retryAfter, fmt.Errorf("%s: %s %s", server, resp.Status, b)
	}
	c.mu.Lock()
	c.server = server
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.server = ""
		c.mu.Unlock()
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20) // a set of thousands of assigned attempts with specs
	for sc.Scan() {
		var f cluster.WorkFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return healthy, 0, fmt.Errorf("%s: bad frame: %w", server, err)
		}
		var work []exec.Assignment
		if f.Type == cluster.WorkFrameWork {
			if err := json.Unmarshal(f.Work, &work); err != nil {
				return healthy, 0, fmt.Errorf("%s: bad work: %w", server, err)
			}
		}
		healthy = true
		c.take(f, work)
	}
	if err := sc.Err(); err != nil {
		return healthy, 0, err
	}
	return healthy, 0, fmt.Errorf("%s closed the stream", server)
}

// take records a frame.
func (c *workClient) take(f cluster.WorkFrame, work []exec.Assignment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.LeaderContact {
		c.lastContact = time.Now()
	}
	if f.Type != cluster.WorkFrameWork || f.Index < c.index {
		return // a server behind what we have seen never takes us back
	}
	c.index, c.work, c.haveWork = f.Index, work, true
	for ch := range c.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
