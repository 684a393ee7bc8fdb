package exec

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// The lease socket speaks newline-terminated text, one message per line.
//
//	agent → supervisor:  "renew"            extend the lease
//	                     "cancel <reason>"  kill the job, record killed/<reason>
//	supervisor → agent:  "started <RFC3339Nano>"   the task is running
//	                     "finished"                result.json is written
//
// A new connection first receives every event so far, so a re-adopting agent
// learns the state without asking. The supervisor exits (closing all
// connections and removing the socket) right after "finished".
const (
	msgRenew    = "renew"
	msgCancel   = "cancel"
	msgStarted  = "started"
	msgFinished = "finished"
)

// writeTimeout bounds every control write so a stuck peer cannot stall
// the supervisor's or the agent's loop.
const writeTimeout = 2 * time.Second

// controlServer is the supervisor's end of lease.sock.
type controlServer struct {
	ln       net.Listener
	onRenew  func()
	onCancel func(reason string)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	events []string
	closed bool
	// running counts serve and read goroutines; close waits for them, so a
	// recycled supervisor starts its next attempt without any of these.
	running sync.WaitGroup
}

func newControlServer(ln net.Listener, onRenew func(), onCancel func(string)) *controlServer {
	return &controlServer{ln: ln, onRenew: onRenew, onCancel: onCancel, conns: map[net.Conn]struct{}{}}
}

func (s *controlServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		for _, ev := range s.events {
			writeLine(c, ev)
		}
		s.running.Add(1)
		s.mu.Unlock()
		go s.read(c)
	}
}

func (s *controlServer) read(c net.Conn) {
	defer s.running.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch cmd {
		case msgRenew:
			s.onRenew()
		case msgCancel:
			s.onCancel(arg)
		}
	}
}

// broadcast sends ev to every connection and remembers it for later ones.
func (s *controlServer) broadcast(ev string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
	for c := range s.conns {
		writeLine(c, ev)
	}
}

func (s *controlServer) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
}

// wait returns once serve (started before close) and every connection's
// reader have returned.
func (s *controlServer) wait() { s.running.Wait() }

func writeLine(c net.Conn, line string) error {
	c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := c.Write([]byte(line + "\n"))
	return err
}

// leaseClient is the agent's end of lease.sock.
type leaseClient struct {
	conn   net.Conn
	events chan string // closed when the supervisor goes away
	mu     sync.Mutex  // serialises writes
}

func dialLease(path string) (*leaseClient, error) {
	c, err := net.DialTimeout("unix", path, writeTimeout)
	if err != nil {
		return nil, err
	}
	lc := &leaseClient{conn: c, events: make(chan string, 8)}
	go func() {
		defer close(lc.events)
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			lc.events <- sc.Text()
		}
	}()
	return lc, nil
}

func (c *leaseClient) send(line string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return writeLine(c.conn, line)
}

func (c *leaseClient) renew() error { return c.send(msgRenew) }

func (c *leaseClient) cancel(reason string) error {
	return c.send(fmt.Sprintf("%s %s", msgCancel, reason))
}

func (c *leaseClient) close() { c.conn.Close() }
