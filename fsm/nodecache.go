package fsm

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// nodeCache memoizes the decoded node records for Tx.Nodes. The leader's
// scheduler and every submit's capacity check read all of them, and with
// thousands of clients (issue 23) decoding each record again on every read
// was most of the leader's CPU during a submit run, though node records
// change rarely.
//
// Versions make it exact. Apply counts each batch that writes a node
// record twice: started before its commit, done after. A view reads done
// before its transaction opens and started inside it: when they are equal,
// every write counted was committed before the view opened and none has
// started since, so the view holds exactly the node records of version
// done, and a memo of that version is the view's. Otherwise (a write in
// flight) the view decodes its own records. A restore counts as a write.
type nodeCache struct {
	started, done atomic.Uint64
	mu            sync.Mutex
	memo          *nodeMemo
}

type nodeMemo struct {
	version uint64
	nodes   []Node // never changed: readers get a copy of the slice; the records' maps and slices are shared
}

// beginWrite and endWrite bracket the commit of a batch that wrote a node.
func (c *nodeCache) beginWrite() { c.started.Add(1) }
func (c *nodeCache) endWrite()   { c.done.Add(1) }

// version is what a view that read done=before holds, ok when exact.
func (c *nodeCache) version(before uint64) (uint64, bool) {
	return before, c.started.Load() == before
}

func (c *nodeCache) get(version uint64) []Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memo == nil || c.memo.version != version {
		return nil
	}
	return c.memo.nodes
}

func (c *nodeCache) put(version uint64, nodes []Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memo == nil || c.memo.version <= version {
		c.memo = &nodeMemo{version: version, nodes: nodes}
	}
}

// NodesVersion counts the committed batches that wrote a node record (or
// restored the state): a reader that watches one node's record re-reads
// it only when this moved.
func (f *FSM) NodesVersion() uint64 { return f.nodes.done.Load() }

// committed is the memo of the committed node records, or nil when there
// is none or a write is in flight. For the applier, the only writer: read
// before its batch writes a node, it is what the batch's transaction holds.
func (c *nodeCache) committed() []Node {
	done := c.done.Load()
	if c.started.Load() != done {
		return nil
	}
	return c.get(done)
}

// memoNode finds name in a memo (sorted by name, as the bucket's keys).
func memoNode(memo []Node, name string) (*Node, bool) {
	i, ok := slices.BinarySearchFunc(memo, name, func(n Node, name string) int { return strings.Compare(n.Name, name) })
	if !ok {
		return nil, false
	}
	return &memo[i], true
}
