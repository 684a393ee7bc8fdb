package fsm

import (
	"bytes"
	"maps"
	"slices"
	"sync"
)

// nodeCache memoizes the decoded node records for Tx.Nodes. The leader's
// scheduler and every submit's capacity check read all of them, and with
// thousands of clients (issue 23) decoding each record again on every read
// was most of the leader's CPU during a submit run, though node records
// change rarely. As liveCache does, it uses a decoded record only while the
// stored bytes equal the bytes it was decoded from, so it can never return
// anything the state does not hold; it is a read-path memo and never
// touches Apply.
type nodeCache struct {
	mu      sync.Mutex
	entries map[string]*nodeEntry
}

type nodeEntry struct {
	raw  []byte
	node Node
}

// take removes and returns the memo (nil while another read holds it:
// that read then decodes everything).
func (c *nodeCache) take() map[string]*nodeEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.entries
	c.entries = nil
	return m
}

// put stores the memo a complete read built.
func (c *nodeCache) put(m map[string]*nodeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = m
}

// node returns the node stored as v under key, from old when v is the
// bytes it was decoded from, and records it in next. The caller owns the
// returned copy.
func (c *nodeCache) node(old, next map[string]*nodeEntry, key, v []byte) (Node, error) {
	e := old[string(key)]
	if e == nil || !bytes.Equal(e.raw, v) {
		e = &nodeEntry{raw: bytes.Clone(v)}
		if err := decode(v, &e.node); err != nil {
			return Node{}, err
		}
	}
	next[string(key)] = e
	return copyNode(&e.node), nil
}

// copyNode is a deep copy: the caller may change what it gets.
func copyNode(n *Node) Node {
	out := *n
	out.Labels = maps.Clone(n.Labels)
	out.Capacity.Named = maps.Clone(n.Capacity.Named)
	out.Drivers = slices.Clone(n.Drivers)
	out.JobUsers = slices.Clone(n.JobUsers)
	return out
}
