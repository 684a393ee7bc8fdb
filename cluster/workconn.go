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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// A work stream once it is open (workstream.go) is a connection taken over
// from net/http (Hijack) with one goroutine: its beat reader (readBeats).
// Its frames are written by a few shared writers (workWriters) when its
// node's attempts change, when the leader confirms a beat and when its
// keep-alive timer fires. Why: the garbage collector scans every
// goroutine's stack on each cycle, and a stream served by net/http held two
// (the handler waiting to write, and a reader under net/http's body reader:
// some 30 frames between them). With 5,000 clients attached, that scan was
// most of what they added to the leader's CPU under a submit load. The
// wire is the same HTTP/1.1 exchange: a chunked request body of up frames,
// a chunked response of work frames, one chunk per frame. (Agents serve
// HTTP/1.1 only, TLS included: certs.Store's NextProtos.)

// workWriteTimeout bounds one write to a client: a client that has not
// drained its socket's buffer by then is dropped, so a writer is never held
// longer (a healthy client's frames never wait for it).
const workWriteTimeout = 2 * time.Second

// workWriterCount is how many goroutines write the frames of all a
// server's streams (each frame is one write(2) of a few hundred bytes).
const workWriterCount = 4

// What a stream owes its client (workConn.due).
const (
	dueWork      = 1 << iota // re-read the node's attempts; send them if they changed
	duePing                  // a beat was confirmed: send the ping now
	dueKeepAlive             // the keep-alive timer fired
)

// workConn is one open work stream.
type workConn struct {
	n      *Node
	node   string
	conn   net.Conn
	up     *upBody // the request body: the client's up frames
	stream *clientStream
	ctx    context.Context // ends with the stream (a re-registration in flight)
	cancel context.CancelFunc
	// detach and leave undo the stream's attach (clientTable) and join
	// (workWaker); set before its first frame is due.
	detach, leave func()
	keepAlive     *time.Timer

	// due holds the frames owed: a stream is queued for a writer when it
	// rises from zero, and the writer takes it all before it reads the
	// state, so a change after that read queues the stream again.
	due atomic.Uint32

	mu          sync.Mutex // one writer at a time; guards what follows
	closed      bool
	cause       error     // why the server ended the stream
	last        []byte    // the work set last sent
	lastReset   uint64    // the GPU reset index last sent
	keyFrom     *string   // the secret the last key sent derives from
	lostSince   time.Time // when keep-alives first found no leader contact
	keepAliveAt time.Time // a keep-alive is due from then
	// The node record's GPU reset as of node version resetOf (gpuReset):
	// a frame re-reads the record only when a node record has changed.
	reset     *fsm.GPUReset
	resetOf   uint64
	resetRead bool
}

// mark records frames owed and queues the stream for a writer unless it is
// queued already. It never blocks: it runs under the waker's and the
// client table's locks.
func (c *workConn) mark(due uint32) {
	if c.due.Or(due) == 0 {
		c.n.workWriters.push(c)
	}
}

// write sends what the stream owes (a writer's turn); buf is the writer's
// scratch space, returned for the next turn.
func (c *workConn) write(buf []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	due := c.due.Swap(0)
	if c.closed {
		return buf
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(workWriteTimeout))
	var err error
	if due&dueWork != 0 {
		buf, err = c.writeWork(buf)
	}
	if err == nil && due&dueKeepAlive != 0 && !time.Now().Before(c.keepAliveAt) {
		if err = c.checkContact(); err != nil {
			c.endLocked(err, true)
			return buf
		}
		due |= duePing
	}
	if err == nil && due&duePing != 0 {
		buf, err = c.writePing(buf)
	}
	if err != nil {
		metrics().workStreamWriteFailures.Inc()
		c.endLocked(err, false)
	}
	return buf
}

// writeWork sends the node's live attempts when they differ from the set
// last sent (an event that changed nothing here sends nothing).
func (c *workConn) writeWork(buf []byte) ([]byte, error) {
	n := c.n
	index := n.fsm.AppliedIndex() // before the read: the set is at least this new
	work, err := n.cfg.Work.NodeWork(c.node)
	if err != nil {
		return buf, fmt.Errorf("work of %s: %w", c.node, err)
	}
	b, err := json.Marshal(work)
	if err != nil {
		return buf, fmt.Errorf("encode the work of %s: %w", c.node, err)
	}
	reset := c.gpuReset()
	if bytes.Equal(b, c.last) && (reset == nil || reset.Index == c.lastReset) {
		return buf, nil
	}
	var frame []byte
	if key := c.newKey(); key != "" || reset != nil {
		frame, err = json.Marshal(WorkFrame{Type: WorkFrameWork, Index: index, LeaderContact: n.workWaker.leaderContact(),
			Work: b, Key: key, GPUReset: reset})
		if err != nil {
			return buf, err
		}
	} else {
		frame = appendWork(make([]byte, 0, len(b)+64), index, n.workWaker.leaderContact(), b)
	}
	if buf, err = c.send(buf, frame); err != nil {
		return buf, err
	}
	c.last = b
	if reset != nil {
		c.lastReset = reset.Index
	}
	return buf, nil
}

// gpuReset is the node record's GPU reset (nil: none, or no record). The
// record is decoded again only when some node record has changed since
// the last read (NodesVersion, read first: a write that lands during the
// read moves it again): every work frame used to decode it, a sixth of
// writing the frame.
func (c *workConn) gpuReset() *fsm.GPUReset {
	v := c.n.fsm.NodesVersion()
	if c.resetRead && v == c.resetOf {
		return c.reset
	}
	rec, err := c.n.nodeRecord(c.node)
	if err != nil {
		return nil // not remembered: the next frame reads it again
	}
	c.reset, c.resetOf, c.resetRead = nil, v, true
	if rec != nil {
		c.reset = rec.GPUReset
	}
	return c.reset
}

// writePing sends a ping: this server's contact with the leader and the
// newest beat the leader confirmed. By hand: thousands of streams each
// send one per beat interval.
func (c *workConn) writePing(buf []byte) ([]byte, error) {
	n := c.n
	if key := c.newKey(); key != "" {
		frame, err := json.Marshal(WorkFrame{Type: WorkFramePing, Index: n.fsm.AppliedIndex(), LeaderContact: n.workWaker.leaderContact(),
			Acked: n.attached.acked(c.stream), Key: key})
		if err != nil {
			return buf, err
		}
		return c.send(buf, frame)
	}
	return c.send(buf, appendPing(nil, n.fsm.AppliedIndex(), n.workWaker.leaderContact(), n.attached.acked(c.stream)))
}

// appendPing appends a ping frame's JSON (WorkFrame, without its line
// end) to b.
func appendPing(b []byte, index uint64, contact bool, acked uint64) []byte {
	b = append(b, `{"type":"ping","index":`...)
	b = strconv.AppendUint(b, index, 10)
	b = append(b, `,"leader_contact":`...)
	b = strconv.AppendBool(b, contact)
	if acked > 0 {
		b = append(b, `,"acked":`...)
		b = strconv.AppendUint(b, acked, 10)
	}
	return append(b, '}')
}

// appendWork appends a work frame's JSON (WorkFrame without a key or a
// GPU reset, without its line end) to b. By hand: json.Marshal would
// compact and check work, which json.Marshal has just written, again.
func appendWork(b []byte, index uint64, contact bool, work []byte) []byte {
	b = append(b, `{"type":"work","index":`...)
	b = strconv.AppendUint(b, index, 10)
	b = append(b, `,"leader_contact":`...)
	b = strconv.AppendBool(b, contact)
	b = append(b, `,"work":`...)
	b = append(b, work...)
	return append(b, '}')
}

// newKey is the client's key when the secret it derives from is not the
// one it was last derived from ("" otherwise): it goes on the next frame.
func (c *workConn) newKey() string {
	cur := c.n.workWaker.internalSecret()
	if cur == c.keyFrom {
		return ""
	}
	c.keyFrom = cur
	return fsm.ClientKey(*cur, c.node)
}

// checkContact is the keep-alive's look at the leader: a server out of
// contact for LeaderContactTimeout drops the stream, so the client moves.
func (c *workConn) checkContact() error {
	switch {
	case c.n.workWaker.leaderContact():
		c.lostSince = time.Time{}
	case c.lostSince.IsZero():
		c.lostSince = time.Now()
	case time.Since(c.lostSince) >= c.n.cfg.LeaderContactTimeout:
		return errors.New("lost the leader: dropping the stream so the client moves")
	}
	return nil
}

// send writes frame (a JSON line without its newline) as one chunk, in one
// write, and restarts the keep-alive timer.
func (c *workConn) send(buf, frame []byte) ([]byte, error) {
	buf = strconv.AppendInt(buf[:0], int64(len(frame)+1), 16)
	buf = append(buf, "\r\n"...)
	buf = append(buf, frame...)
	buf = append(buf, "\n\r\n"...)
	if _, err := c.conn.Write(buf); err != nil {
		return buf, err
	}
	// The keep-alive waits two relay intervals more than PingInterval, as
	// the next confirmation may come that much later than the last one (a
	// keep-alive just before it would be a second write per beat), and an
	// idle client's slower beats stretch it by half their slack (one
	// interval's difference).
	d := c.n.cfg.WorkStreams.PingInterval + 2*c.n.cfg.Clients.RelayInterval + c.n.attached.slack(c.stream)/2
	c.keepAliveAt = time.Now().Add(d)
	c.keepAlive.Reset(d)
	return buf, nil
}

// endLocked ends the stream from the server's side (c.mu held): clean ends
// the response as HTTP/1.1 does (the client reads an orderly end), then
// the connection closes, which ends the beat reader.
func (c *workConn) endLocked(cause error, clean bool) {
	if c.closed {
		return
	}
	c.closed, c.cause = true, cause
	if clean {
		_ = c.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.conn.Write([]byte("0\r\n\r\n"))
	}
	_ = c.conn.Close()
}

// end ends the stream from the server's side.
func (c *workConn) end(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(cause, true)
}

// readBeats is the stream's goroutine: it reads the client's up frames
// until the stream ends or falls silent for the read timeout, and then
// lets go of everything the stream held.
func (c *workConn) readBeats() {
	err := c.readUp()
	c.mu.Lock()
	c.endLocked(err, true)
	err = c.cause // the server's reason when it ended the stream first
	c.mu.Unlock()
	c.cancel()
	c.keepAlive.Stop()
	c.leave()
	c.detach()
	c.n.workConns.remove(c)
	if !errors.Is(err, net.ErrClosed) {
		c.n.logger.Debug("work stream ended", "node", c.node, "err", err)
	}
}

// readUp reads up frames until one fails or is refused.
func (c *workConn) readUp() error {
	n, node := c.n, c.node
	var every time.Duration // what the last beat announced
	for {
		// The next beat is due within the interval the last one announced.
		_ = c.conn.SetReadDeadline(time.Now().Add(n.cfg.Clients.ReadTimeout + beatSlack(every)))
		line, err := c.up.readLine()
		if err != nil {
			return fmt.Errorf("client %s: %w", node, err)
		}
		if seq, everyMS, ok := beatSeq(line); ok {
			every = time.Duration(everyMS) * time.Millisecond
			n.attached.beat(c.stream, seq, every, time.Now())
			continue
		}
		var f UpFrame
		if err := json.Unmarshal(line, &f); err == nil && f.Type == UpFrameLeave {
			n.clientLeaving(c.ctx, node)
			return fmt.Errorf("client %s is stopping", node)
		}
		if err == nil && f.Type == UpFrameHello {
			// A client whose self-description changed (its GPUs, issue 24)
			// says it again; registered off this goroutine, as it commits.
			self, err := checkHello(f, node)
			if err != nil {
				return fmt.Errorf("client %s: %w", node, err)
			}
			go func() {
				if _, _, err := n.registerClient(c.ctx, self); err != nil {
					n.logger.Warn("client re-registration failed", "client", node, "err", err)
				}
			}()
			continue
		}
		if err != nil || f.Type != UpFrameBeat || f.Seq == 0 {
			return fmt.Errorf("client %s: bad up frame %.100q", node, line)
		}
		if err := checkBeatEvery(f.EveryMS); err != nil {
			return fmt.Errorf("client %s: beat %w", node, err)
		}
		every = time.Duration(f.EveryMS) * time.Millisecond
		n.attached.beat(c.stream, f.Seq, every, time.Now())
	}
}

// workConns is every open stream of a server, so that stopping ends them
// all (net/http's Shutdown knows nothing of taken-over connections).
type workConns struct {
	mu      sync.Mutex
	m       map[*workConn]struct{}
	stopped error // why no stream may open any more
}

// add registers c, or says why no stream may open now.
func (s *workConns) add(c *workConn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped != nil {
		return s.stopped
	}
	if s.m == nil {
		s.m = map[*workConn]struct{}{}
	}
	s.m[c] = struct{}{}
	metrics().workStreamsOpen.Inc()
	return nil
}

func (s *workConns) remove(c *workConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[c]; ok {
		delete(s.m, c)
		metrics().workStreamsOpen.Dec()
	}
}

// stop ends every stream and refuses new ones for cause.
func (s *workConns) stop(cause error) {
	s.mu.Lock()
	if s.stopped == nil {
		s.stopped = cause
	}
	open := make([]*workConn, 0, len(s.m))
	for c := range s.m {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		c.end(cause)
	}
}

// workWriters is the queue of streams that owe frames, drained by
// workWriterCount goroutines (writeWorkLoop).
type workWriters struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*workConn
	closed bool
}

func newWorkWriters() *workWriters {
	w := &workWriters{}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *workWriters) push(c *workConn) {
	w.mu.Lock()
	w.queue = append(w.queue, c)
	w.mu.Unlock()
	w.cond.Signal()
}

// pop waits for a stream that owes frames (nil: the server is closing).
func (w *workWriters) pop() *workConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) == 0 && !w.closed {
		w.cond.Wait()
	}
	if w.closed {
		return nil
	}
	c := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	if len(w.queue) == 0 {
		w.queue = w.queue[:0:0] // let a burst's backing array go
	}
	return c
}

func (w *workWriters) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// writeWorkLoop is one of the writers of the streams' frames.
func (n *Node) writeWorkLoop() {
	buf := make([]byte, 0, 512)
	for c := n.workWriters.pop(); c != nil; c = n.workWriters.pop() {
		buf = c.write(buf)
		if cap(buf) > 64<<10 {
			buf = make([]byte, 0, 512) // a large work set's frame is not kept
		}
	}
}

// workStopLoop ends the streams when the server stops serving them
// (StopWorkStreams) or closes, and the writers when it closes.
func (n *Node) workStopLoop() {
	select {
	case <-n.workStop:
		n.workConns.stop(errors.New("this server is stopping: the client moves to another"))
		<-n.closing
	case <-n.closing:
	}
	n.workConns.stop(ErrShutdown)
	n.workWriters.close()
}

// rawError answers a request on a taken-over connection as workError
// does, and closes it after the client has read the answer (net/http's
// lingering close: closing with the body unread would reset the
// connection, and the client could lose the answer).
func rawError(conn net.Conn, status int, code, msg string, retryAfter int) {
	body, _ := json.Marshal(applyResponse{Error: msg, Code: code})
	body = append(body, '\n')
	head := fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n",
		status, http.StatusText(status), len(body))
	if retryAfter > 0 {
		head = fmt.Appendf(head, "Retry-After: %d\r\n", retryAfter)
	}
	head = append(head, "\r\n"...)
	_ = conn.SetWriteDeadline(time.Now().Add(workWriteTimeout))
	if _, err := conn.Write(append(head, body...)); err == nil {
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, _ = io.CopyN(io.Discard, conn, 256<<10)
	}
	_ = conn.Close()
}
