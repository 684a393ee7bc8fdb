package rig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/jepsen/client"
	"github.com/foreman-sched/foreman/jepsen/netns"
)

// Cluster is N agents on a Topology.
type Cluster struct {
	Bin    string
	Dir    string // run directory: data dirs, logs, probe records
	Topo   *netns.Topology
	Nodes  []*Node
	Voters int
	// ExtraFlags are appended to every agent's command line.
	ExtraFlags []string
	// Timeout is the per-request timeout of the harness's clients.
	Timeout time.Duration
	// Token is the ACL token every client of the harness sends (set by
	// BootstrapACL when the agents run with --acl).
	Token string
	// PKI is the TLS material (EnableTLS); nil: plain HTTP.
	PKI *PKI
	// Env is added to every agent's environment (the store's credentials).
	Env []string
	// Store is the cluster's object store (the outputs workload); nil: none.
	Store *Store
	// GPUs, when positive, gives every node (new members too) a fake GPU
	// host of that many devices of its own (gpu.go), under --gpu-root.
	GPUs int
}

// GPUUUIDs lists node's GPUs by index (empty without Cluster.GPUs).
func (c *Cluster) GPUUUIDs(node string) []string {
	var out []string
	for i := 0; i < c.GPUs; i++ {
		out = append(out, GPUUUID(node, i))
	}
	return out
}

// NewCluster prepares (does not start) one node per namespace of topo.
func NewCluster(bin, dir string, topo *netns.Topology, voters int) *Cluster {
	c := &Cluster{Bin: bin, Dir: dir, Topo: topo, Voters: voters, Timeout: 3 * time.Second}
	for i := range topo.NS {
		c.addNode(i)
	}
	return c
}

func (c *Cluster) addNode(i int) *Node {
	name := fmt.Sprintf("n%d", i+1)
	n := &Node{Index: i, Name: name, NS: c.Topo.NS[i], IP: c.Topo.IPs[i],
		DataDir: filepath.Join(c.Dir, "data", name), LogPath: filepath.Join(c.Dir, "logs", name+".log"),
		ClockFile: filepath.Join(c.Dir, "clock", name)}
	if c.PKI != nil {
		n.Scheme = "https"
	}
	c.Nodes = append(c.Nodes, n)
	return n
}

// MarkClients makes the nodes from index first on clients (--role client
// joining every server). Call it before Start.
func (c *Cluster) MarkClients(first int) {
	for i := first; i < len(c.Nodes); i++ {
		c.Nodes[i].Client = true
	}
}

// Servers lists the indices of the raft members (every node but the
// clients): the ones that answer the API.
func (c *Cluster) Servers() []int {
	var out []int
	for i, n := range c.Nodes {
		if !n.Client {
			out = append(out, i)
		}
	}
	return out
}

// joinFlags points a node at every other initial node (a client at every
// server).
func (c *Cluster) joinFlags(self int, bootstrap bool) []string {
	var f []string
	if c.Nodes[self].Client {
		f = append(f, "--role", "client")
		for _, n := range c.Nodes {
			if !n.Client {
				f = append(f, "--join", fmt.Sprintf("%s:%d", n.IP, Port))
			}
		}
		return append(f, c.ExtraFlags...)
	}
	for i, n := range c.Nodes {
		if i != self && !n.Client && (bootstrap || n.Running()) {
			f = append(f, "--join", fmt.Sprintf("%s:%d", n.IP, Port))
		}
	}
	if bootstrap {
		f = append(f, "--bootstrap-expect", fmt.Sprint(len(c.Servers())), "--voters", fmt.Sprint(c.Voters))
	}
	return append(f, c.ExtraFlags...)
}

// start launches node i with flags, plus its TLS flags and the gossip
// key on a cluster with TLS.
func (c *Cluster) start(i int, flags []string) error {
	n := c.Nodes[i]
	n.Env = append([]string(nil), c.Env...)
	if c.GPUs > 0 {
		root := filepath.Join(c.Dir, "gpu", n.Name)
		if err := makeGPUHost(root, n.Name, c.GPUs); err != nil {
			return fmt.Errorf("%s: fake GPU host: %w", n.Name, err)
		}
		flags = append(append([]string(nil), flags...), "--gpu-root", root, "--nvidia-smi", filepath.Join(root, "nvidia-smi"))
		n.HostSys = true
	}
	if c.PKI != nil {
		tf, err := c.PKI.tlsFlags(n)
		if err != nil {
			return fmt.Errorf("%s: certificate: %w", n.Name, err)
		}
		flags = append(append([]string(nil), flags...), tf...)
		n.Env = append(n.Env, EnvGossipKey+"="+c.PKI.GossipKey)
	}
	return n.Start(c.Bin, flags)
}

// Start launches every node for the first time; under --acl the clients
// wait for StartClients, which needs a token the ACL bootstrap makes
// possible.
func (c *Cluster) Start() error {
	for i, n := range c.Nodes {
		if n.Client && c.acl() {
			continue
		}
		if err := c.start(i, c.joinFlags(i, true)); err != nil {
			return err
		}
	}
	return nil
}

// StartClients starts the clients Start left for after the ACL bootstrap
// (--acl): each with a token of role client:NAME in --token-file.
func (c *Cluster) StartClients(ctx context.Context, d time.Duration) error {
	for i, n := range c.Nodes {
		if !n.Client || n.Running() {
			continue
		}
		secret, err := c.IssueToken(ctx, d, "client-"+n.Name, api.ACLRole{Role: "client", Node: n.Name})
		if err != nil {
			return err
		}
		file := filepath.Join(c.Dir, n.Name+".token")
		if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
			return err
		}
		if err := c.start(i, append(c.joinFlags(i, true), "--token-file", file)); err != nil {
			return err
		}
	}
	return nil
}

// acl reports whether the agents run with --acl.
func (c *Cluster) acl() bool { return slices.Contains(c.ExtraFlags, "--acl") }

// Restart starts node i again from its data directory.
func (c *Cluster) Restart(i int) error {
	n := c.Nodes[i]
	f := n.Flags()
	if f == nil {
		return c.start(i, c.joinFlags(i, true))
	}
	return n.Start(c.Bin, f)
}

// AddNode creates a namespace and starts a new agent that joins the others.
func (c *Cluster) AddNode() (*Node, error) {
	if err := c.Topo.AddNode(); err != nil {
		return nil, err
	}
	i := len(c.Nodes)
	n := c.addNode(i)
	// --role server: the nemesis changes raft's membership (--role auto
	// would make a late joiner a client once the voters are all there).
	return n, c.start(i, append(c.joinFlags(i, false), "--voters", fmt.Sprint(c.Voters), "--role", "server"))
}

// Client returns a fresh client for node i.
func (c *Cluster) Client(i int) *client.Client {
	n := c.Nodes[i]
	cl := client.NewTLS(n.Name, n.URL(), c.Timeout, c.ClientTLS())
	cl.Token = c.Token
	return cl
}

// WorkloadClient returns a client for node i that sends token (the
// workload's least-privilege token) instead of the harness's.
func (c *Cluster) WorkloadClient(i int, token string) *client.Client {
	cl := c.Client(i)
	if token != "" {
		cl.Token = token
	}
	return cl
}

// BootstrapACL issues the management token (agents started with --acl)
// through any node, retrying while the cluster elects its first leader,
// and makes every later client send it.
func (c *Cluster) BootstrapACL(ctx context.Context, d time.Duration) error {
	return c.throughAnyNode(ctx, d, "ACL bootstrap", func(cl *client.Client) error {
		secret, err := cl.ACLBootstrap(ctx)
		if err == nil {
			c.Token = secret
		}
		return err
	})
}

// IssueToken creates a token with roles through any node with the
// management token, retrying while a leader settles; returns its secret.
func (c *Cluster) IssueToken(ctx context.Context, d time.Duration, name string, roles ...api.ACLRole) (string, error) {
	var secret string
	if err := c.throughAnyNode(ctx, d, "token "+name, func(cl *client.Client) (err error) {
		secret, err = cl.ACLCreateToken(ctx, name, roles...)
		return err
	}); err != nil {
		return "", err
	}
	return secret, nil
}

// throughAnyNode calls fn with a client of each running node in turn
// until one call succeeds, going round again every 300 ms for at most d;
// what names the call in the error.
func (c *Cluster) throughAnyNode(ctx context.Context, d time.Duration, what string, fn func(*client.Client) error) error {
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		for i, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			cl := c.Client(i)
			err := fn(cl)
			cl.Close()
			if err == nil {
				return nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s within %v: %v", what, d, last)
}

// Leader asks every running node and returns the index of the leader a
// majority of answers name, or -1.
func (c *Cluster) Leader(ctx context.Context) int {
	votes := map[int]int{}
	for i, n := range c.Nodes {
		if !n.Running() || n.Client {
			continue
		}
		cl := c.Client(i)
		ri, err := cl.Raft(ctx)
		cl.Close()
		if err != nil {
			continue
		}
		if j := c.Match(ri.Leader); j >= 0 {
			votes[j]++
		}
	}
	best, bestN := -1, 0
	for j, v := range votes {
		if v > bestN {
			best, bestN = j, v
		}
	}
	return best
}

// Match maps a leader reference (name, IP or IP:port) to a node index.
func (c *Cluster) Match(ref string) int {
	if ref == "" {
		return -1
	}
	for i, n := range c.Nodes {
		if ref == n.Name || ref == n.IP || strings.HasPrefix(ref, n.IP+":") || strings.Contains(ref, "//"+n.IP+":") {
			return i
		}
	}
	return -1
}

// WaitLeader polls until a leader is known or the deadline passes.
func (c *Cluster) WaitLeader(ctx context.Context, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if l := c.Leader(ctx); l >= 0 {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
	return -1, fmt.Errorf("no leader within %v", d)
}

// WaitReady polls GET /v1/ready on every running node.
func (c *Cluster) WaitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for i, n := range c.Nodes {
		if !n.Running() || n.Client {
			continue
		}
		cl := c.Client(i)
		for {
			err := cl.Ready(ctx)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				cl.Close()
				return fmt.Errorf("%s not ready after %v: %v", n.Name, d, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
		cl.Close()
	}
	return nil
}

// Shutdown resumes and stops every agent, then kills whatever is left in
// the namespaces (orphaned supervisors and jobs).
func (c *Cluster) Shutdown() {
	for _, n := range c.Nodes {
		_ = n.Stop(5 * time.Second)
	}
	c.Topo.KillAll()
}
