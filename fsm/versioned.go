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
// A view that opened while a batch was being committed (started ahead of
// done) holds that batch or not. Each counted batch also leaves the raft
// index it commits as applied, and the view reads the applied index its
// own transaction holds: it holds exactly the batches whose index is at
// most that. Under a steady stream of batches (the leader placing, reports
// arriving) a view is rarely opened with none in flight, so without this
// the memo was seldom the view's, and patches from an ever older memo
// grew into whole reads.
//
// While the records are written (clients attaching, attempts placed and
// finished) the memo is often a version or two behind. So each counted
// batch also leaves the keys it wrote (changes), and a view patches the
// memo: it reads from its own transaction every key written between the
// memo's version and the view's, and keeps the rest of the memo. Whatever
// its transaction holds for those keys is right for it, so the patch is
// exact even when the view's version is not known (then every key written
// up to started is read again); it becomes the new memo only when the
// view's version is known.
type versionedMemo[T any] struct {
	started, done atomic.Uint64
	mu            sync.Mutex
	memo          T
	memoVersion   uint64
	hasMemo       bool
	changes       []keyChange   // of the last counted batches, oldest first
	changedKeys   int           // keys held by changes
	patched       atomic.Uint64 // views that patched the memo (tests)
	resolved      atomic.Uint64 // views opened during a commit whose version was told by index (tests)
}

// keyChange is what the batch counted as version wrote: the keys, or
// every record (a restore), and the applied index it committed.
type keyChange struct {
	version uint64
	index   uint64
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
// keys named (every record with all) and commits index as applied.
func (c *versionedMemo[T]) beginWrite(keys []string, all bool, index uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.changes) > 0 && (len(c.changes) >= maxChanges || c.changedKeys+len(keys) > maxChangedKeys) {
		c.changedKeys -= len(c.changes[0].keys)
		c.changes[0] = keyChange{}
		c.changes = c.changes[1:]
	}
	c.changes = append(c.changes, keyChange{version: c.started.Load() + 1, index: index, keys: keys, all: all})
	c.changedKeys += len(keys)
	c.started.Add(1)
}

func (c *versionedMemo[T]) endWrite() { c.done.Add(1) }

// version is what a view that read done=before and whose transaction
// holds applied() as its applied index holds; ok when that is known.
func (c *versionedMemo[T]) version(before uint64, applied func() uint64) (uint64, bool) {
	if c.started.Load() == before {
		return before, true
	}
	index := applied()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.changes) == 0 || c.changes[0].version > before+1 {
		return before, false // the batches after before are no longer known
	}
	v := before
	for _, ch := range c.changes {
		if ch.version <= before {
			continue
		}
		if ch.all {
			// A restore holds the FSM's lock against every view; a view
			// that read before it cannot see past it.
			return before, false
		}
		if ch.index > index {
			break // committed after the view opened, as is every later one
		}
		v = ch.version
	}
	c.resolved.Add(1)
	return v, true
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
// the view's: version when exact, else any a view that read done=version
// may hold (up to started, read now: the view's transaction is open, so a
// batch it can see has begun), sorted and without repeats. ok is false
// when there is no memo or the keys are not all known (a restore, or older
// than the changes kept).
func (c *versionedMemo[T]) patchable(version uint64, exact bool) (memo T, keys []string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hasMemo {
		return memo, nil, false
	}
	upTo := version
	if !exact {
		upTo = c.started.Load()
	}
	lo, hi := min(c.memoVersion, version), max(c.memoVersion, upTo)
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
