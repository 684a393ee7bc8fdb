package fsm

import (
	"slices"
	"sync"
	"sync/atomic"
)

// versionedMemo keeps one decoded copy of a set of records (every node,
// every live attempt) for the read path, and tells a view exactly when
// that copy is its own. The node memo (nodecache.go) and the live set
// (liveset.go) are two of them.
//
// Versions make it exact. Apply counts each batch that writes one of the
// records twice: started before its commit, done after. A view reads done
// before its transaction opens and started inside it: when they are equal,
// every write counted was committed before the view opened and none has
// started since, so the view holds exactly the records of version done,
// and a memo of that version is the view's. A restore counts as a write of
// every record.
//
// While the records are written (clients attaching, attempts placed and
// finished) the memo is often a version or two behind. So each counted
// batch also leaves the keys it wrote (changes), and a view patches the
// memo: it reads from its own transaction every key written between the
// memo's version and what the view may hold, and keeps the rest of the
// memo. Whatever its transaction holds for those keys is right for it, so
// the patch is exact even with a write in flight; it becomes the new memo
// only when the view's version is exact.
type versionedMemo[T any] struct {
	started, done atomic.Uint64
	mu            sync.Mutex
	memo          T
	memoVersion   uint64
	hasMemo       bool
	changes       []keyChange   // of the last counted batches, oldest first
	changedKeys   int           // keys held by changes
	patched       atomic.Uint64 // views that patched the memo (tests)
}

// keyChange is what the batch counted as version wrote: the keys, or
// every record (a restore).
type keyChange struct {
	version uint64
	keys    []string
	all     bool
}

// The changes kept: at most maxChanges batches and about maxChangedKeys
// keys. A memo older than what is kept is rebuilt from the records.
const (
	maxChanges     = 1024
	maxChangedKeys = 1 << 16
)

// beginWrite and endWrite bracket the commit of a batch that wrote the
// keys named (every record with all).
func (c *versionedMemo[T]) beginWrite(keys []string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.changes) > 0 && (len(c.changes) >= maxChanges || c.changedKeys+len(keys) > maxChangedKeys) {
		c.changedKeys -= len(c.changes[0].keys)
		c.changes[0] = keyChange{}
		c.changes = c.changes[1:]
	}
	c.changes = append(c.changes, keyChange{version: c.started.Load() + 1, keys: keys, all: all})
	c.changedKeys += len(keys)
	c.started.Add(1)
}

func (c *versionedMemo[T]) endWrite() { c.done.Add(1) }

// version is what a view that read done=before holds, ok when exact.
func (c *versionedMemo[T]) version(before uint64) (uint64, bool) {
	return before, c.started.Load() == before
}

// get returns the memo when it is of version.
func (c *versionedMemo[T]) get(version uint64) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hasMemo || c.memoVersion != version {
		var zero T
		return zero, false
	}
	return c.memo, true
}

// put makes m, built by a view of exactly version, the memo (unless a
// newer one is there).
func (c *versionedMemo[T]) put(version uint64, m T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hasMemo || c.memoVersion <= version {
		c.memo, c.memoVersion, c.hasMemo = m, version, true
	}
}

// patchable returns the memo and the keys written between its version and
// any version a view that read done=before may hold (up to started, read
// now: the view's transaction is open, so a batch it can see has begun),
// sorted and without repeats. ok is false when there is no memo or the
// keys are not all known (a restore, or older than the changes kept).
func (c *versionedMemo[T]) patchable(before uint64) (memo T, keys []string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hasMemo {
		return memo, nil, false
	}
	lo, hi := min(c.memoVersion, before), max(c.memoVersion, c.started.Load())
	if lo == hi {
		return c.memo, nil, true
	}
	if len(c.changes) == 0 || c.changes[0].version > lo+1 {
		return memo, nil, false
	}
	for _, ch := range c.changes {
		if ch.version <= lo || ch.version > hi {
			continue
		}
		if ch.all {
			return memo, nil, false
		}
		keys = append(keys, ch.keys...)
	}
	slices.Sort(keys)
	return c.memo, slices.Compact(keys), true
}

// committed is the memo of the committed records, when there is one and
// no write is in flight. For the applier, the only writer: read before its
// batch writes, it is what the batch's transaction holds.
func (c *versionedMemo[T]) committed() (T, bool) {
	done := c.done.Load()
	if c.started.Load() != done {
		var zero T
		return zero, false
	}
	return c.get(done)
}
