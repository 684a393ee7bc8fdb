package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/certs"
)

// Network decides which peers this node may reach right now. Production
// leaves Config.Network nil (everything is reachable); the test cluster
// injects one to partition nodes in-process. Reachable is called from raft's
// and memberlist's goroutines on every dial, read, write and packet, so it
// must be fast and safe for concurrent use. addr is a peer's host:port (its
// raft, gossip or HTTP address).
type Network interface {
	Reachable(addr string) bool
}

// errUnreachable is what a partitioned dial, read or write returns.
var errUnreachable = errors.New("peer unreachable (partitioned)")

func reachable(n Network, addr string) bool { return n == nil || n.Reachable(addr) }

// heardTracker records when bytes last arrived from each peer over a
// connection this node dialled (for the leader, these are the followers'
// answers to AppendEntries and heartbeats). Times carry Go's monotonic
// reading, so they measure durations on this machine only.
type heardTracker struct {
	mu    sync.Mutex
	heard map[string]time.Time // raft address → last read
}

func newHeardTracker() *heardTracker { return &heardTracker{heard: map[string]time.Time{}} }

func (h *heardTracker) touch(addr string) {
	now := time.Now()
	h.mu.Lock()
	h.heard[addr] = now
	h.mu.Unlock()
}

func (h *heardTracker) get(addr string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.heard[addr]
	return t, ok
}

// peerDialer dials other agents from this agent's bind address when that
// is a specific IP, so what a peer (or a firewall between them) sees is the
// agent's own address in both directions. Without it, agents bound to
// separate addresses on one host dialled out from 127.0.0.1 (or the
// host's primary address): a node cut off by its address still reached
// its peers over TCP, and memberlist's push-pull carried its refutation
// across the cut and revived it in gossip (issue 22: a rerun after 25 s).
func peerDialer(bindIP string, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if ip := net.ParseIP(bindIP); ip != nil && !ip.IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	return d
}

// filteredConn is a dialled connection that stops working when its peer
// becomes unreachable, and optionally records successful reads.
type filteredConn struct {
	net.Conn
	peer    string
	network Network
	heard   *heardTracker
}

func (c *filteredConn) Read(b []byte) (int, error) {
	if !reachable(c.network, c.peer) {
		c.Conn.Close()
		return 0, errUnreachable
	}
	n, err := c.Conn.Read(b)
	if n > 0 && !reachable(c.network, c.peer) {
		c.Conn.Close() // bytes that arrive after a cut never happened
		return 0, errUnreachable
	}
	if n > 0 && c.heard != nil {
		c.heard.touch(c.peer)
	}
	return n, err
}

func (c *filteredConn) Write(b []byte) (int, error) {
	if !reachable(c.network, c.peer) {
		c.Conn.Close()
		return 0, errUnreachable
	}
	return c.Conn.Write(b)
}

// streamLayer is raft's transport: TCP through the Network filter, under
// mutual TLS when tlsStore is set (both ends must present an agent
// certificate of the cluster CA; see certs.PeerServerConfig).
type streamLayer struct {
	net.Listener
	source    string // the bind IP outgoing connections come from
	advertise net.Addr
	network   Network
	heard     *heardTracker
	tlsStore  *certs.Store
}

func newStreamLayer(bind string, advertise *net.TCPAddr, network Network, heard *heardTracker, tlsStore *certs.Store) (*streamLayer, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listener on %s: %w", bind, err)
	}
	if tlsStore != nil {
		// The handshake runs on raft's first read, in the connection's own
		// goroutine, so a slow or hostile peer never blocks Accept.
		l = tls.NewListener(l, tlsStore.PeerServerConfig())
	}
	source, _, _ := net.SplitHostPort(bind)
	return &streamLayer{Listener: l, source: source, advertise: advertise, network: network, heard: heard, tlsStore: tlsStore}, nil
}

// Dial implements raft.StreamLayer.
func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	peer := string(addr)
	if !reachable(s.network, peer) {
		return nil, fmt.Errorf("dial %s: %w", peer, errUnreachable)
	}
	c, err := peerDialer(s.source, timeout).Dial("tcp", peer)
	if err != nil {
		return nil, err
	}
	fc := &filteredConn{Conn: c, peer: peer, network: s.network, heard: s.heard}
	if s.tlsStore == nil {
		return fc, nil
	}
	tc := tls.Client(fc, s.tlsStore.PeerClientConfig())
	_ = tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		tc.Close()
		return nil, fmt.Errorf("raft TLS handshake with %s: %w", peer, err)
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// Addr implements net.Listener with the advertised address, which raft
// stores in its configuration.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// gossipTransport wraps memberlist's UDP+TCP transport with the Network
// filter: packets to or from an unreachable peer are dropped silently (a
// blackhole, as in a real partition), streams to it fail to dial.
type gossipTransport struct {
	*memberlist.NetTransport
	source   string // the bind IP outgoing streams come from
	network  Network
	packetCh chan *memberlist.Packet
	done     chan struct{}
	once     sync.Once
}

func newGossipTransport(inner *memberlist.NetTransport, source string, network Network) *gossipTransport {
	t := &gossipTransport{NetTransport: inner, source: source, network: network, packetCh: make(chan *memberlist.Packet, 64), done: make(chan struct{})}
	go t.filterPackets()
	return t
}

func (t *gossipTransport) filterPackets() {
	in := t.NetTransport.PacketCh()
	for {
		select {
		case p := <-in:
			if !reachable(t.network, p.From.String()) {
				continue
			}
			select {
			case t.packetCh <- p:
			case <-t.done:
				return
			}
		case <-t.done:
			return
		}
	}
}

// PacketCh implements memberlist.Transport.
func (t *gossipTransport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// WriteTo implements memberlist.Transport.
func (t *gossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if !reachable(t.network, addr) {
		return time.Now(), nil
	}
	return t.NetTransport.WriteTo(b, addr)
}

// DialTimeout implements memberlist.Transport.
func (t *gossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if !reachable(t.network, addr) {
		return nil, fmt.Errorf("dial %s: %w", addr, errUnreachable)
	}
	c, err := peerDialer(t.source, timeout).Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &filteredConn{Conn: c, peer: addr, network: t.network}, nil
}

// Shutdown implements memberlist.Transport.
// The inner transport's UDP listener blocks on its packet channel, and its
// Shutdown waits for that listener, so keep draining until it is down.
func (t *gossipTransport) Shutdown() error {
	t.once.Do(func() { close(t.done) })
	drained := make(chan struct{})
	go func() {
		in := t.NetTransport.PacketCh()
		for {
			select {
			case <-in:
			case <-drained:
				return
			}
		}
	}()
	err := t.NetTransport.Shutdown()
	close(drained)
	return err
}

// WriteToAddress implements memberlist.NodeAwareTransport (the embedded
// transport's version would bypass the filter).
func (t *gossipTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *gossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}
