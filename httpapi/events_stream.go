package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// An event stream writes bursts: everything one wake-up read, already
// encoded. Through net/http's ResponseWriter a burst costs several socket
// writes (its 2 KB response buffer, the chunk framing, the connection's
// 4 KB buffer, the flush); with a hundred streams woken by every committed
// batch those writes were most of the agent's CPU under a submit load. So
// an HTTP/1.x stream takes the connection over (Hijack) after writing its
// own response head, and each burst is one write(2); the body is
// close-delimited (Connection: close, no chunking), which every SSE client
// reads. HTTP/2, or a ResponseWriter that cannot be hijacked, gets the
// plain path: one Write and one Flush per burst.

// eventStream is where one GET /v1/events writes.
type eventStream interface {
	// write sends one burst, failing when the client has not taken it
	// within the write timeout.
	write(p []byte) error
	// gone is closed when the client has gone away.
	gone() <-chan struct{}
	close()
}

// openStream answers the request with a 200 and the headers set on w.
// Nothing is written yet: the first write sends the head. The stream ends
// (gone is closed) when shutdown is cancelled.
func openStream(w http.ResponseWriter, r *http.Request, timeout time.Duration, shutdown context.Context) eventStream {
	if r.ProtoMajor == 1 {
		if s, ok := hijackStream(w, r, timeout, shutdown); ok {
			return s
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(shutdown, cancel)
	return &plainStream{w: w, rc: http.NewResponseController(w), ctx: ctx, cancel: cancel, stop: stop, timeout: timeout}
}

// hijackedStream owns the connection.
type hijackedStream struct {
	conn    net.Conn
	timeout time.Duration
	head    []byte // the response head, sent with the first burst
	done    chan struct{}
	stop    func() bool // unhooks the close at shutdown
}

func hijackStream(w http.ResponseWriter, r *http.Request, timeout time.Duration, shutdown context.Context) (*hijackedStream, bool) {
	var head strings.Builder
	head.WriteString("HTTP/1.1 200 OK\r\n")
	h := w.Header().Clone()
	h.Set("Connection", "close")
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	_ = h.Write(&head)
	head.WriteString("\r\n")
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false
	}
	// net/http stopped reading; the stream reads on, only to notice the
	// client closing (nothing it sends matters). What net/http had
	// buffered is dropped with rw.
	_ = rw
	s := &hijackedStream{conn: conn, timeout: timeout, head: []byte(head.String()), done: make(chan struct{})}
	// Closing the connection ends a blocked write and the watch's read:
	// the handler then sees gone.
	s.stop = context.AfterFunc(shutdown, func() { _ = conn.Close() })
	go s.watch()
	return s, true
}

func (s *hijackedStream) watch() {
	defer close(s.done)
	var b [64]byte
	for {
		if _, err := s.conn.Read(b[:]); err != nil {
			return
		}
	}
}

func (s *hijackedStream) write(p []byte) error {
	if s.head != nil {
		p = append(s.head, p...)
		s.head = nil
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
	_, err := s.conn.Write(p)
	return err
}

func (s *hijackedStream) gone() <-chan struct{} { return s.done }

func (s *hijackedStream) close() {
	s.stop()
	_ = s.conn.Close()
	<-s.done
}

// plainStream writes through the ResponseWriter.
type plainStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context // the request's, also cancelled at shutdown
	cancel  context.CancelFunc
	stop    func() bool
	timeout time.Duration
	started bool
}

func (s *plainStream) write(p []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if !s.started {
		s.started = true
		s.w.WriteHeader(http.StatusOK)
	}
	if _, err := s.w.Write(p); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

func (s *plainStream) gone() <-chan struct{} { return s.ctx.Done() }

func (s *plainStream) close() {
	s.stop()
	s.cancel()
}

// Server.Shutdown closes idle connections and waits for active ones, but
// it does not know hijacked ones, and a stream's handler never ends on its
// own: without help the streams would outlive the server. So the first
// stream served by an http.Server registers an OnShutdown hook with it
// that cancels a context; every stream of that server ends on it (a
// hijacked connection is closed at once, even mid-write). Clients resume
// on another node with their last ID.
type streamShutdown struct {
	mu      sync.Mutex
	servers map[*http.Server]context.Context
}

// ctx returns the context cancelled when the server serving r shuts down
// (never, for a request that did not come through an http.Server).
func (c *streamShutdown) ctx(r *http.Request) context.Context {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		return context.Background()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx, ok := c.servers[srv]; ok {
		return ctx
	}
	if c.servers == nil {
		c.servers = map[*http.Server]context.Context{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.servers[srv] = ctx
	srv.RegisterOnShutdown(cancel)
	return ctx
}
