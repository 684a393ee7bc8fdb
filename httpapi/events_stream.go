package httpapi

import (
	"errors"
	"net"
	"net/http"
	"strings"
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
// Nothing is written yet: the first write sends the head.
func openStream(w http.ResponseWriter, r *http.Request, timeout time.Duration) eventStream {
	if r.ProtoMajor == 1 {
		if s, ok := hijackStream(w, r, timeout); ok {
			return s
		}
	}
	return &plainStream{w: w, rc: http.NewResponseController(w), ctx: r, timeout: timeout}
}

// hijackedStream owns the connection.
type hijackedStream struct {
	conn    net.Conn
	timeout time.Duration
	head    []byte // the response head, sent with the first burst
	done    chan struct{}
}

func hijackStream(w http.ResponseWriter, r *http.Request, timeout time.Duration) (*hijackedStream, bool) {
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
	_ = s.conn.Close()
	<-s.done
}

// plainStream writes through the ResponseWriter.
type plainStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     *http.Request
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

func (s *plainStream) gone() <-chan struct{} { return s.ctx.Context().Done() }

func (s *plainStream) close() {}
