package cluster

import (
	"net"
	"testing"
)

// An agent bound to a specific IP dials its peers from that IP (issue 22:
// agents sharing a host dialled from 127.0.0.1, so cutting one off by its
// address left its outgoing TCP working); bound to 0.0.0.0 it leaves the
// source to the kernel.
func TestPeerDialerSourceIsBindIP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct{ bind, want string }{
		{"127.0.0.3", "127.0.0.3"},
		{"0.0.0.0", "127.0.0.1"},
	} {
		c, err := peerDialer(tc.bind, 0).Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		got := s.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
		s.Close()
		if got != tc.want {
			t.Errorf("bind %s: the peer saw a connection from %s, want %s", tc.bind, got, tc.want)
		}
	}
}
