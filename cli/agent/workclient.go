package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
)

// workClient is a client's view of its work (issue 23): instead of a local
// replica it holds one work stream (cluster/workstream.go) to one of the
// servers, and serves the latest set it received as exec.Assignments.
// Up the same stream it sends its hello (self) and a numbered beat every
// cluster.ClientBeatInterval while it holds attempts, every
// cluster.ClientIdleBeatInterval while it holds none (each beat announces
// its interval; work arriving brings a beat at once); the leader hears it
// through them (cluster/clientbeats.go).
// As exec.LeaderContact it is in contact while a beat it sent less than
// contact ago was confirmed by the leader (a ping's acked): the lease-
// renewal gate of invariant 2. It moves to another server when its stream
// ends, fails or falls silent, after a fully jittered, growing backoff (or
// the server's Retry-After), resuming from the highest index it has seen
// so that its view never goes back in time.
type workClient struct {
	self    fsm.Node // sent in the hello; changed by SetSelf (under mu)
	name    string   // self.Name, which never changes (read without mu)
	servers []string // base URLs, e.g. http://10.0.0.5:7070
	hc      *http.Client
	auth    func(http.Header) // the cluster-internal credential; nil adds nothing
	// contact is how long a confirmed beat keeps the gate open
	// (cluster.ClientContactWindow: sched's ClientSafetyMargin covers it).
	contact   time.Duration
	beatEvery time.Duration // while it holds attempts
	idleEvery time.Duration // while it holds none
	logger    *slog.Logger

	mu          sync.Mutex
	index       uint64
	work        []exec.Assignment
	haveWork    bool
	lastContact time.Time     // send time of the newest beat the leader confirmed
	every       time.Duration // the interval the newest beat announced
	// busy gets a signal when work arrives while the client held none:
	// it beats at once at beatEvery (buffered).
	busy   chan struct{}
	server string // the server of the open stream ("" while none)
	synced bool   // the open stream delivered its first work frame
	// endStream ends the open stream (nil while none), whose frames count
	// only while gen is the one it opened with; stalls notes the stall
	// watch's polls: a stall ends the stream (watchStalls).
	endStream context.CancelCauseFunc
	gen       uint64
	stalls    *cluster.StallWatch
	watchers  map[chan struct{}]struct{}
	// keys are the last two keys servers sent (fsm.ClientKey; newest
	// first): servers calling this client's port under ACL present one.
	keys        [2]string
	selfChanged chan struct{} // SetSelf: say the hello again (buffered)
	leaving     chan struct{} // closed by Leave
	ended       chan struct{} // a stream ended (buffered: Leave waits on it)
	leaveOnce   sync.Once
	// gpuResets has the newest operator GPU health reset a work frame
	// carried (buffered 1: the newest replaces an unread one).
	gpuResets chan fsm.GPUReset
}

func newWorkClient(self fsm.Node, servers []string, hc *http.Client, auth func(http.Header), contact time.Duration, logger *slog.Logger) *workClient {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &workClient{self: self, name: self.Name, servers: servers, hc: hc, auth: auth, contact: contact,
		beatEvery: cluster.ClientBeatInterval, idleEvery: cluster.ClientIdleBeatInterval, logger: logger, watchers: map[chan struct{}]struct{}{},
		busy: make(chan struct{}, 1), stalls: cluster.NewStallWatch(),
		leaving: make(chan struct{}), ended: make(chan struct{}, 1), selfChanged: make(chan struct{}, 1),
		gpuResets: make(chan fsm.GPUReset, 1)}
}

// SetSelf changes the self-description (its GPUs, issue 24): the open
// stream says the hello again, and every later stream opens with it.
func (c *workClient) SetSelf(self fsm.Node) {
	c.mu.Lock()
	self.Name = c.name
	c.self = self
	c.mu.Unlock()
	select {
	case c.selfChanged <- struct{}{}:
	default:
	}
}

func (c *workClient) selfNode() fsm.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.self
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
	if node != c.name {
		return nil, fmt.Errorf("this node's work stream is %s's, not %s's", c.name, node)
	}
	if !c.haveWork {
		return nil, errors.New("no work received from a server yet")
	}
	return append([]exec.Assignment(nil), c.work...), nil
}

// InContactWithLeader implements exec.LeaderContact: the leader confirmed
// a beat this client sent within the contact timeout.
func (c *workClient) InContactWithLeader() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.lastContact.IsZero() && time.Since(c.lastContact) < c.contact
}

// InSync implements exec.LeaderContact: the open stream delivered its
// first work frame, which is at least as new as anything seen before, and
// the process has not stalled since (watchStalls).
func (c *workClient) InSync() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced && c.stalls.Fresh(time.Now())
}

// stallPoll is how often a client polls its stall watch: well inside
// cluster.StallLimit, and a tenth of a server's sync loop's wake-ups (an
// idle client should cost nothing).
const stallPoll = 100 * time.Millisecond

// errStalled ends a stream the client stopped reading for a while.
var errStalled = errors.New("this client did not run for a while (stopped or frozen)")

// watchStalls polls until ctx ends. A client that was stopped (SIGSTOP, a
// frozen VM) for longer than its silence lets it hold its attempts may find
// a stale work set and a fresh confirmation queued on its stream: the
// leader may have declared its attempts lost and placed them elsewhere
// meanwhile, and starting one would run a second copy (cluster/stall.go has
// the servers' side). A stall ends the stream: the next one's first work
// frame is the server's current set.
func (c *workClient) watchStalls(ctx context.Context) {
	t := time.NewTicker(stallPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if gap, stalled := c.stalls.Poll(time.Now()); stalled {
			c.stalled(gap)
		}
	}
}

// stalled ends the open stream: no frame of it counts any more, even one
// read before it ends.
func (c *workClient) stalled(gap time.Duration) {
	c.mu.Lock()
	c.synced = false
	c.gen++
	end := c.endStream
	c.mu.Unlock()
	if end != nil {
		c.logger.Info("did not run for a while; reopening the work stream", "gap", gap.Round(time.Millisecond))
		end(errStalled)
	}
}

// Server is the server of the open stream, "" while there is none.
func (c *workClient) Server() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server
}

// Index is the highest work index seen.
func (c *workClient) Index() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.index
}

// Run keeps a stream open until ctx ends.
func (c *workClient) Run(ctx context.Context) error {
	go c.watchStalls(ctx)
	// A server that hands this client to another (a planned move,
	// cluster/clientspread.go) names it: KeepStreaming opens the next
	// stream there at once.
	return cluster.KeepStreaming(ctx, c.servers, c.stream, func(server string, err error, wait time.Duration) {
		var moved cluster.MovedTo
		switch {
		case errors.As(err, &moved):
			c.logger.Debug("work stream handed to another server", "from", server, "to", string(moved))
		case errors.Is(err, errStreamRefused):
			c.logger.Warn("a server refused this client's credential", "server", server, "err", err, "retry_in", wait)
		default:
			c.logger.Debug("work stream ended", "server", server, "err", err, "retry_in", wait)
		}
	})
}

// stream holds one server's stream until it ends. healthy: it delivered
// at least one frame (the backoff starts over).
func (c *workClient) stream(ctx context.Context, server string) (healthy bool, retryAfter time.Duration, err error) {
	c.mu.Lock()
	index := c.index
	// Busy: it holds attempts (as the last stream said; a client that
	// has not heard yet, at its first start, is not): the server admits it
	// first.
	busy := len(c.work) > 0
	c.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	url := fmt.Sprintf("%s%swork/%s?index=%d", server, cluster.InternalPrefix, c.name, index)
	if busy {
		url += "&busy=1"
	}
	upR, upW := io.Pipe()
	defer upW.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, upR)
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	if c.auth != nil {
		c.auth(req.Header)
	}
	beats := newBeatLog()
	go c.sendUp(ctx, upW, beats)
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
		err := fmt.Errorf("%s: %s %s", server, resp.Status, bytes.TrimSpace(b))
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			err = fmt.Errorf("%w: %w", errStreamRefused, err)
		}
		return false, retryAfter, err
	}
	c.mu.Lock()
	c.server, c.endStream = server, cancel
	gen := c.gen
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.server, c.synced, c.endStream = "", false, nil
		c.mu.Unlock()
		select {
		case c.ended <- struct{}{}:
		default:
		}
	}()
	// A server that falls silent (cut off, frozen) is left: a ping comes
	// with each confirmed beat, a keep-alive at least every interval.
	watchdog := time.AfterFunc(c.silence(), func() { cancel(errors.New("no frame from the server")) })
	defer watchdog.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20) // a set of thousands of assigned attempts with specs
	for sc.Scan() {
		watchdog.Reset(c.silence())
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
		if f.Type == cluster.WorkFrameMove {
			if to, ok := sameScheme(server, f.Server); ok {
				return healthy, 0, cluster.MovedTo(to)
			}
			continue // the stream ends next; the client picks from its list
		}
		c.take(gen, f, work, beats)
	}
	if err := sc.Err(); err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			err = cause
		}
		return healthy, 0, err
	}
	return healthy, 0, fmt.Errorf("%s closed the stream", server)
}

// silence is how long a stream may go without a frame from the server
// before the client leaves it: three of its announced beat intervals.
func (c *workClient) silence() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return 3 * max(c.every, c.beatEvery)
}

// nextEvery is the interval the next beat announces: beatEvery while the
// client holds attempts or has not yet heard what it holds (a restarted
// client re-adopting its attempts), idleEvery otherwise.
func (c *workClient) nextEvery() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	every := c.beatEvery
	if c.haveWork && len(c.work) == 0 {
		every = max(c.idleEvery, c.beatEvery)
	}
	c.every = every
	return every
}

// sendUp writes the hello and then a beat every nextEvery until ctx ends
// or the server stops reading.
func (c *workClient) sendUp(ctx context.Context, w *io.PipeWriter, beats *beatLog) {
	enc := json.NewEncoder(w)
	self := c.selfNode()
	if err := enc.Encode(cluster.UpFrame{Type: cluster.UpFrameHello, Node: &self}); err != nil {
		return
	}
	tick := time.NewTimer(0)
	defer tick.Stop()
	for seq := uint64(1); ; seq++ {
		every := c.nextEvery()
		beats.sent(seq, time.Now())
		if err := enc.Encode(cluster.UpFrame{Type: cluster.UpFrameBeat, Seq: seq, EveryMS: every.Milliseconds()}); err != nil {
			w.CloseWithError(err)
			return
		}
		tick.Reset(every)
	wait:
		for {
			select {
			case <-ctx.Done():
				w.CloseWithError(ctx.Err())
				return
			case <-c.leaving:
				_ = enc.Encode(cluster.UpFrame{Type: cluster.UpFrameLeave})
				w.Close()
				return
			case <-c.selfChanged:
				self := c.selfNode()
				if err := enc.Encode(cluster.UpFrame{Type: cluster.UpFrameHello, Node: &self}); err != nil {
					w.CloseWithError(err)
					return
				}
			case <-c.busy:
				if every > c.beatEvery {
					// Work after idling: a confirmed beat now opens the
					// contact gate (the start waits on it) and tells the
					// leader to expect beats every beatEvery.
					break wait
				}
			case <-tick.C:
				break wait
			}
		}
	}
}

// Leave tells the server this client is stopping (it is recorded dead at
// once) and waits, at most d, for the server to end the stream. With no
// stream open (between servers), the next stream says it right after its
// hello. Run then keeps trying other servers until its ctx ends: call
// Leave last.
func (c *workClient) Leave(d time.Duration) {
	select {
	case <-c.ended: // an old stream's news
	default:
	}
	c.leaveOnce.Do(func() { close(c.leaving) })
	select {
	case <-c.ended:
	case <-time.After(d):
	}
}

// beatLog remembers when each recent beat of a stream was sent.
type beatLog struct {
	mu     sync.Mutex
	sentAt map[uint64]time.Time
}

func newBeatLog() *beatLog { return &beatLog{sentAt: map[uint64]time.Time{}} }

func (b *beatLog) sent(seq uint64, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sentAt[seq] = at
	if seq > 64 {
		delete(b.sentAt, seq-64) // a confirmation that old would close the gate anyway
	}
}

func (b *beatLog) at(seq uint64) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.sentAt[seq]
	return t, ok
}

// sameScheme accepts a move to a server reached as the one that sent it
// (http or https: a server never sends its clients to plain HTTP from
// TLS), with a host and nothing else.
func sameScheme(from, to string) (string, bool) {
	f, err1 := url.Parse(from)
	t, err2 := url.Parse(to)
	if err1 != nil || err2 != nil || t.Scheme != f.Scheme || t.Host == "" || (t.Path != "" && t.Path != "/") || t.RawQuery != "" || t.User != nil {
		return "", false
	}
	return t.Scheme + "://" + t.Host, true
}

// errStreamRefused: a server refused the stream's credential (401/403).
var errStreamRefused = errors.New("refused")

// ServerKey reports whether key is one a server sent this client (the
// current or the one before the last rotation); never for "".
func (c *workClient) ServerKey(key string) bool {
	c.mu.Lock()
	keys := c.keys
	c.mu.Unlock()
	ok := false
	for _, k := range keys {
		if k != "" && subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			ok = true
		}
	}
	return ok
}

// latest puts v in ch (buffered 1), replacing a value not yet read.
func latest[T any](ch chan T, v T) {
	for {
		select {
		case ch <- v:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// take records a frame.
func (c *workClient) take(gen uint64, f cluster.WorkFrame, work []exec.Assignment, beats *beatLog) {
	sent, confirmed := beats.at(f.Acked)
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return // the stream was ended by a stall
	}
	if confirmed && sent.After(c.lastContact) {
		if time.Since(c.lastContact) >= c.contact {
			// The gate opens again (work after idling): the executor's
			// deferred starts need not wait for their recheck.
			c.notify()
		}
		c.lastContact = sent
	}
	if f.Key != "" && f.Key != c.keys[0] {
		c.keys = [2]string{f.Key, c.keys[0]}
	}
	if f.Type != cluster.WorkFrameWork || f.Index < c.index {
		return // a server behind what we have seen never takes us back
	}
	if len(work) > 0 && (!c.haveWork || len(c.work) == 0) {
		select {
		case c.busy <- struct{}{}:
		default:
		}
	}
	c.index, c.work, c.haveWork, c.synced = f.Index, work, true, true
	if f.GPUReset != nil {
		latest(c.gpuResets, *f.GPUReset)
	}
	c.notify()
}

// notify signals every watcher (under mu).
func (c *workClient) notify() {
	for ch := range c.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
