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
// done, and a memo of that version is the view's. A restore counts as a
// write of every node.
//
// While nodes are written (5,000 clients attaching, a fleet's beats after
// a failover) the memo is always a version or two behind, and decoding
// every record on every plan was 45% of the leader's CPU during an attach.
// So each counted batch also leaves the names it wrote (changes), and a
// view patches the memo instead: it reads from its own transaction every
// node written between the memo's version and what the view may hold, and
// keeps every other record of the memo. Whatever its transaction holds for
// those names is right for it, so the patch is exact even with a write in
// flight; it becomes the new memo only when the view's version is exact.
type nodeCache struct {
	started, done atomic.Uint64
	mu            sync.Mutex
	memo          *nodeMemo
	changes       []nodeChange  // of the last maxNodeChanges counted batches, oldest first
	patched       atomic.Uint64 // views that patched the memo (tests)
}

type nodeMemo struct {
	version uint64
	nodes   []Node // never changed: readers get a copy of the slice; the records' maps and slices are shared
}

// nodeChange is what the batch counted as version wrote: the node names,
// or every node (a restore).
type nodeChange struct {
	version uint64
	names   []string
	all     bool
}

// maxNodeChanges bounds the names kept: a memo older than that many
// batches is rebuilt from the records.
const maxNodeChanges = 1024

// beginWrite and endWrite bracket the commit of a batch that wrote the
// nodes named (every node with all).
func (c *nodeCache) beginWrite(names []string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.changes) == maxNodeChanges {
		c.changes = slices.Delete(c.changes, 0, 1)
	}
	c.changes = append(c.changes, nodeChange{version: c.started.Load() + 1, names: names, all: all})
	c.started.Add(1)
}

func (c *nodeCache) endWrite() { c.done.Add(1) }

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

// patchable returns the memo and the names written between its version
// and any version a view that read done=before may hold (up to started,
// read now: the view's transaction is open, so a batch it can see has
// begun). ok is false when there is no memo or the names are not all
// known (a restore, or older than the changes kept).
func (c *nodeCache) patchable(before uint64) (memo *nodeMemo, names []string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memo == nil {
		return nil, nil, false
	}
	lo, hi := min(c.memo.version, before), max(c.memo.version, c.started.Load())
	if lo == hi {
		return c.memo, nil, true
	}
	if len(c.changes) == 0 || c.changes[0].version > lo+1 {
		return nil, nil, false
	}
	for _, ch := range c.changes {
		if ch.version <= lo || ch.version > hi {
			continue
		}
		if ch.all {
			return nil, nil, false
		}
		names = append(names, ch.names...)
	}
	slices.Sort(names)
	return c.memo, slices.Compact(names), true
}

// patchNodes is memo with the records of names as read now (get returns
// nil for a node that is gone), sorted by name like the bucket.
func patchNodes(memo []Node, names []string, get func(name string) (*Node, error)) ([]Node, error) {
	out := make([]Node, 0, len(memo)+len(names))
	i := 0
	for _, name := range names {
		for i < len(memo) && memo[i].Name < name {
			out = append(out, memo[i])
			i++
		}
		if i < len(memo) && memo[i].Name == name {
			i++ // replaced (or dropped) by what is read now
		}
		n, err := get(name)
		if err != nil {
			return nil, err
		}
		if n != nil {
			out = append(out, *n)
		}
	}
	return append(out, memo[i:]...), nil
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
