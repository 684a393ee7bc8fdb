package clustertest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/fsm"
)

// Timeouts for the helper's waits, generous for a loaded 2-core machine.
const (
	LeaderTimeout   = 30 * time.Second
	ConvergeTimeout = 45 * time.Second
	pollEvery       = 25 * time.Millisecond
)

// Options shapes a test cluster.
type Options struct {
	// Voters is the target number of raft voters (default 3, or 1 for a
	// one-node cluster).
	Voters int
	// BootstrapExpect starts every node at once with BootstrapExpect = n
	// instead of bootstrapping node 0 and joining the others one by one (so
	// the first Voters nodes become the voters, in order).
	BootstrapExpect bool
	// DeadServerTimeout defaults to 2s.
	DeadServerTimeout time.Duration
	// SnapshotThreshold defaults to raft's test-friendly 1024 entries.
	SnapshotThreshold uint64
	// Sync turns fsync on (off by default: nodes share one kernel, so a
	// Kill cannot lose written pages anyway).
	Sync bool
	// Configure, if set, edits each node's config before it starts.
	Configure func(i int, cfg *cluster.Config)
	// Work, if set, is node i's work source for each start, over the
	// state it opened (a restart opens it again).
	Work func(i int, f *fsm.FSM) cluster.WorkSource
	// Serve, if set, adds handlers beside the internal endpoints on node
	// i's HTTP server, for each start (the API, in a test of it).
	Serve func(i int, n *cluster.Node, f *fsm.FSM, mux *http.ServeMux)
	// Verbose logs at debug level to the test log; default is warnings.
	Verbose bool
	// NamePrefix names the nodes NamePrefix0, NamePrefix1, ... (default
	// "node"), so two clusters in one test have different node names.
	NamePrefix string
}

// Cluster is a set of in-process nodes.
type Cluster struct {
	t      testing.TB
	opts   Options
	fabric *fabric
	nodes  []*Node
	logger *slog.Logger
}

// Node is one member of a test Cluster. Its embedded *cluster.Node is nil
// while the node is killed.
type Node struct {
	*cluster.Node
	Index int
	Name  string
	Dir   string
	Port  int // base port: HTTP; raft +1; gossip +2
	FSM   *fsm.FSM
	join  []string
	c     *Cluster
	srv   *http.Server

	// mu guards the embedded pointer for Live, which goroutines running
	// beside Kill and Restart use.
	mu sync.Mutex
}

// Live is the running node, or nil while it is killed; unlike reading the
// embedded field, it is safe while another goroutine kills or restarts it.
func (nd *Node) Live() *cluster.Node {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.Node
}

// NewCluster starts n nodes and waits until all of them are in the raft
// configuration and a leader is elected. Everything is torn down with
// t.Cleanup.
func NewCluster(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if opts.Voters == 0 {
		opts.Voters = 3
		if n == 1 {
			opts.Voters = 1
		}
	}
	if opts.DeadServerTimeout == 0 {
		opts.DeadServerTimeout = 2 * time.Second
	}
	if opts.SnapshotThreshold == 0 {
		opts.SnapshotThreshold = 1024
	}
	if opts.NamePrefix == "" {
		opts.NamePrefix = "node"
	}
	level := slog.LevelWarn
	if opts.Verbose {
		level = slog.LevelDebug
	}
	c := &Cluster{t: t, opts: opts, fabric: newFabric(),
		logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))}
	for i := 0; i < n; i++ {
		port := freeBase(t)
		nd := &Node{Index: i, Name: fmt.Sprintf("%s%d", opts.NamePrefix, i), Dir: t.TempDir(), Port: port, c: c}
		c.fabric.register(i, port)
		c.nodes = append(c.nodes, nd)
	}
	// Registered after the TempDirs: cleanups run last-in first-out, so the
	// nodes stop before their data dirs are removed.
	t.Cleanup(c.Close)
	if opts.BootstrapExpect {
		for _, nd := range c.nodes {
			nd.join = []string{c.nodes[0].joinAddr()}
			if nd.Index == 0 && n > 1 {
				nd.join = []string{c.nodes[1].joinAddr()}
			}
			c.start(nd, n)
		}
	} else {
		for _, nd := range c.nodes {
			if nd.Index > 0 {
				nd.join = []string{c.nodes[0].joinAddr()}
			}
			c.start(nd, 0)
			c.WaitForLeader()
			c.waitInRaft(nd.Name)
		}
	}
	c.WaitForLeader()
	for _, nd := range c.nodes {
		c.waitInRaft(nd.Name)
	}
	return c
}

func (nd *Node) joinAddr() string { return fmt.Sprintf("127.0.0.1:%d", nd.Port) }

// config builds a node's configuration with test timings.
func (c *Cluster) config(nd *Node, expect int) cluster.Config {
	cfg := cluster.DefaultConfig()
	cfg.DataDir, cfg.Name, cfg.BindAddr, cfg.Port = nd.Dir, nd.Name, "127.0.0.1", nd.Port
	cfg.Join, cfg.BootstrapExpect, cfg.Voters = nd.join, expect, c.opts.Voters
	cfg.DeadServerTimeout = c.opts.DeadServerTimeout
	cfg.LeaderContactTimeout = 1500 * time.Millisecond
	cfg.ReconcileInterval = 500 * time.Millisecond
	cfg.NoSync = !c.opts.Sync
	cfg.Network = view{f: c.fabric, from: nd.Index}
	cfg.Raft.HeartbeatTimeout = 500 * time.Millisecond
	cfg.Raft.ElectionTimeout = 500 * time.Millisecond
	cfg.Raft.LeaderLeaseTimeout = 250 * time.Millisecond
	cfg.Raft.SnapshotInterval = 500 * time.Millisecond
	cfg.Raft.SnapshotThreshold = c.opts.SnapshotThreshold
	cfg.Raft.TrailingLogs = 256
	cfg.Gossip.ProbeInterval = 200 * time.Millisecond
	cfg.Gossip.ProbeTimeout = 100 * time.Millisecond
	cfg.Gossip.SuspicionMult = 3
	cfg.Gossip.SuspicionMaxTimeoutMult = 2
	cfg.Gossip.GossipInterval = 50 * time.Millisecond
	cfg.Gossip.PushPullInterval = 2 * time.Second
	cfg.Gossip.TCPTimeout = time.Second
	cfg.Gossip.GossipToTheDeadTime = 10 * time.Second
	if c.opts.Configure != nil {
		c.opts.Configure(nd.Index, &cfg)
	}
	return cfg
}

// start opens the node's state file, starts the cluster node and its HTTP
// server (serving only the internal endpoints).
// A first start that loses its ports to another process moves to fresh
// ones (a restart must keep its ports: they are in the raft configuration).
func (c *Cluster) start(nd *Node, expect int) {
	c.t.Helper()
	for attempt := 0; ; attempt++ {
		err := c.startErr(nd, expect)
		if err == nil {
			return
		}
		if attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			c.t.Fatalf("start %s: %v", nd.Name, err)
		}
		nd.Port = freeBase(c.t)
		c.fabric.register(nd.Index, nd.Port)
	}
}

func (c *Cluster) startErr(nd *Node, expect int) error {
	cfg := c.config(nd, expect)
	logger := c.logger
	f, err := cluster.OpenFSM(nd.Dir, fsm.Options{NoSync: cfg.NoSync, Logger: logger, InitialMmapSize: 64 << 20}, logger)
	if err != nil {
		return err
	}
	if c.opts.Work != nil {
		cfg.Work = c.opts.Work(nd.Index, f)
	}
	self := fsm.Node{Capacity: fsm.Resources{CPU: 2000, MemoryMB: 1024}, Drivers: []string{"process"}, Version: "test",
		Labels: map[string]string{"index": fmt.Sprint(nd.Index)}}
	cn, err := cluster.New(cfg, f, self, logger)
	if err != nil {
		f.Close()
		return err
	}
	ln, err := net.Listen("tcp", nd.joinAddr())
	if err != nil {
		cn.Kill()
		f.Close()
		return fmt.Errorf("http listener: %w", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS.HTTPServerConfig(false))
	}
	mux := http.NewServeMux()
	mux.Handle(cluster.InternalPrefix, cn.InternalHandler())
	if c.opts.Serve != nil {
		c.opts.Serve(nd.Index, cn, f, mux)
	}
	nd.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go nd.srv.Serve(ln)
	nd.mu.Lock()
	nd.Node, nd.FSM = cn, f
	nd.mu.Unlock()
	if err := cn.Start(context.Background()); err != nil {
		nd.stop(true)
		return err
	}
	return nil
}

// StartNode starts the stopped node i again (Restart without the stop).
func (c *Cluster) StartNode(i int) error { return c.startErr(c.nodes[i], 0) }

// stop ends the node: abruptly (kill) or with a graceful Shutdown.
func (nd *Node) stop(kill bool) {
	if nd.Node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if nd.srv != nil {
		nd.srv.Close()
	}
	if kill {
		nd.Node.Kill()
		nd.FSM.Close()
	} else if err := nd.Node.Shutdown(ctx); err != nil {
		nd.c.t.Logf("shutdown %s: %v", nd.Name, err)
	}
	nd.mu.Lock()
	nd.Node, nd.FSM, nd.srv = nil, nil, nil
	nd.mu.Unlock()
}

// Close stops every running node.
func (c *Cluster) Close() {
	for _, nd := range c.nodes {
		nd.stop(true)
	}
}

// Node returns node i.
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Nodes returns every node, running or not.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Live returns the running nodes.
func (c *Cluster) Live() []*Node {
	var out []*Node
	for _, nd := range c.nodes {
		if nd.Node != nil {
			out = append(out, nd)
		}
	}
	return out
}

// Leader returns the running node that is leader, or nil.
func (c *Cluster) Leader() *Node {
	for _, nd := range c.Live() {
		if nd.IsLeader() {
			return nd
		}
	}
	return nil
}

// Followers returns the running nodes that are not leader.
func (c *Cluster) Followers() []*Node {
	var out []*Node
	for _, nd := range c.Live() {
		if !nd.IsLeader() {
			out = append(out, nd)
		}
	}
	return out
}

// WaitForLeader waits until exactly one running node is leader and every
// running node in its partition agrees on it.
func (c *Cluster) WaitForLeader() *Node {
	c.t.Helper()
	var leader *Node
	c.Eventually(LeaderTimeout, "a leader elected", func() error {
		leader = c.Leader()
		if leader == nil {
			return errors.New("no leader")
		}
		for _, nd := range c.Live() {
			if !c.fabric.reachable(leader.Index, nd.joinAddr()) {
				continue
			}
			if name, _ := nd.Leader(); name != leader.Name {
				return fmt.Errorf("%s thinks the leader is %q, not %s", nd.Name, name, leader.Name)
			}
		}
		return nil
	})
	return leader
}

// waitInRaft waits until name is in the leader's raft configuration.
func (c *Cluster) waitInRaft(name string) {
	c.t.Helper()
	c.Eventually(ConvergeTimeout, name+" in the raft configuration", func() error {
		l := c.Leader()
		if l == nil {
			return errors.New("no leader")
		}
		for _, s := range l.RaftInfo().Servers {
			if s.ID == name {
				return nil
			}
		}
		return fmt.Errorf("servers: %+v", l.RaftInfo().Servers)
	})
}

// WaitConverged waits until every running node has applied the same index
// and has the same state hash.
func (c *Cluster) WaitConverged() (index uint64, hash string) {
	c.t.Helper()
	c.Eventually(ConvergeTimeout, "all nodes converged", func() error {
		var first string
		for i, nd := range c.Live() {
			idx, h, err := nd.FSM.StateHash()
			if err != nil {
				return err
			}
			if i == 0 {
				index, hash, first = idx, h, nd.Name
				continue
			}
			if idx != index || h != hash {
				return fmt.Errorf("%s at %d/%s, %s at %d/%s", first, index, short(hash), nd.Name, idx, short(h))
			}
		}
		return nil
	})
	return index, hash
}

func short(h string) string { return h[:min(len(h), 12)] }

// Partition splits the nodes into groups that reach only their own group;
// a node in no group is isolated.
func (c *Cluster) Partition(groups ...[]int) { c.fabric.partition(groups) }

// Heal reconnects every node.
func (c *Cluster) Heal() { c.fabric.heal() }

// Kill stops node i abruptly: no leadership transfer, no gossip leave.
func (c *Cluster) Kill(i int) { c.nodes[i].stop(true) }

// Stop shuts node i down gracefully (Shutdown, not Leave).
func (c *Cluster) Stop(i int) { c.nodes[i].stop(false) }

// Restart stops node i if it runs and starts it again from its data
// directory with no join flags: it must find the cluster from the peers it
// remembered.
func (c *Cluster) Restart(i int) *Node {
	c.t.Helper()
	nd := c.nodes[i]
	nd.stop(true)
	nd.join = nil
	var err error
	c.Eventually(LeaderTimeout, "restart "+nd.Name, func() error {
		err = c.startErr(nd, 0)
		return err
	})
	return nd
}

// Eventually polls fn until it returns nil or the timeout passes.
func (c *Cluster) Eventually(timeout time.Duration, what string, fn func() error) {
	c.t.Helper()
	Eventually(c.t, timeout, what, fn)
}

// Eventually polls fn until it returns nil or the timeout passes, then
// fails the test with fn's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(pollEvery)
	}
}

// freeBase finds a base port whose three TCP ports and gossip UDP port are
// free right now. It stays below Linux's ephemeral range (32768+) so that
// outgoing connections cannot take the ports before the node binds them.
func freeBase(t testing.TB) int {
	t.Helper()
	for range 200 {
		base := 10000 + rand.IntN(22000)
		if portsFree(base) {
			return base
		}
	}
	t.Fatal("no free port range found")
	return 0
}

func portsFree(base int) bool {
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for p := base; p < base+3; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		closers = append(closers, l)
	}
	u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", base+2))
	if err != nil {
		return false
	}
	closers = append(closers, u)
	return true
}

// testWriter sends log lines to t.Log (dropped after the test ends).
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // logging after the test finished panics
	if os.Getenv("CLUSTERTEST_QUIET") == "" {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
