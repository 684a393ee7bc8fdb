package agent

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// The listener admits max connections from one address, closes the next
// at once, logs that (at most once a minute, not per refusal), and
// admits again when one of the open ones is closed.
func TestPerIPListenerRefusesBeyondMaxAndSaysSo(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ln := newPerIPListener(raw, 2, slog.New(slog.NewTextHandler(&logs, nil)))
	defer ln.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := dial(), dial()
	sa, sb := <-accepted, <-accepted
	for range 2 { // two refusals, one warning
		c := dial()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil || n != 0 {
			t.Fatalf("third connection from one address read %d, %v; want it closed", n, err)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("third connection from one address was left open")
		}
		c.Close()
	}
	if got := strings.Count(logs.String(), "connection refused: too many open from one address"); got != 1 {
		t.Errorf("%d refusal warnings for two refusals, want 1 (rate limited): %s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "remote=127.0.0.1") {
		t.Errorf("the warning names no address: %s", logs.String())
	}
	sa.Close() // frees a place
	a.Close()
	c := dial()
	defer c.Close()
	select {
	case sc := <-accepted:
		sc.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("a connection after one closed was not admitted")
	}
	b.Close()
	sb.Close()
}

// syncBuffer is a bytes.Buffer the logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var _ io.Writer = (*syncBuffer)(nil)
