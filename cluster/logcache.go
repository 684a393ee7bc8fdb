package cluster

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// Bounds of the in-memory cache of recent raft log entries.
const (
	// logCacheEntries caps the number of cached entries (raft's own
	// LogCache bound; plenty for single-job entries of a few hundred bytes).
	logCacheEntries = 1024
	// logCacheBytes caps their payload. raft.LogCache bounds only the
	// count, and a batch of 1,000 submits is a ~300 KB entry, so 1,024 of
	// them held ~300 MB of heap on every node (30 MB after 100,000 batched
	// jobs). The cache only has to cover entries that are about to be read
	// back: the leader's replication to followers that keep up and a
	// follower's apply of what it just stored; a follower that falls
	// further behind reads from bbolt, as it would after the count bound.
	logCacheBytes = 4 << 20
)

// logCache is raft.LogCache bounded by bytes as well as entries. It holds a
// contiguous window [first, first+len(win)) of the newest stored entries;
// raft stores entries in index order, and a store that does not extend the
// window (after a DeleteRange, or a conflicting rewrite) starts a new one.
// Safe for concurrent use: raft reads from its replication goroutines while
// the main loop stores.
type logCache struct {
	store raft.LogStore

	mu    sync.RWMutex
	win   []*raft.Log // win[i] has index first+i
	first uint64
	bytes int
	max   int // bytes
	cap   int // entries
}

var _ raft.LogStore = (*logCache)(nil)

func newLogCache(store raft.LogStore, maxEntries, maxBytes int) *logCache {
	return &logCache{store: store, max: maxBytes, cap: maxEntries}
}

func logSize(l *raft.Log) int { return len(l.Data) + len(l.Extensions) + 64 }

// IsMonotonic passes the store's property through (raft.MonotonicLogStore).
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (c *logCache) GetLog(idx uint64, log *raft.Log) error {
	c.mu.RLock()
	if idx >= c.first && idx-c.first < uint64(len(c.win)) {
		*log = *c.win[idx-c.first]
		c.mu.RUnlock()
		return nil
	}
	c.mu.RUnlock()
	return c.store.GetLog(idx, log)
}

func (c *logCache) StoreLog(log *raft.Log) error { return c.StoreLogs([]*raft.Log{log}) }

func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return fmt.Errorf("unable to store logs within log store, err: %q", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if len(c.win) == 0 || l.Index != c.first+uint64(len(c.win)) {
			c.reset()
			c.first = l.Index
		}
		c.win = append(c.win, l)
		c.bytes += logSize(l)
	}
	// Drop the oldest entries, keeping at least the newest one.
	drop := 0
	for len(c.win)-drop > 1 && (c.bytes > c.max || len(c.win)-drop > c.cap) {
		c.bytes -= logSize(c.win[drop])
		c.win[drop] = nil
		drop++
	}
	if drop > 0 {
		c.first += uint64(drop)
		n := copy(c.win, c.win[drop:])
		clear(c.win[n:])
		c.win = c.win[:n]
	}
	if c.bytes > c.max { // a single entry larger than the bound
		c.reset()
	}
	return nil
}

func (c *logCache) reset() {
	clear(c.win)
	c.win = c.win[:0]
	c.first, c.bytes = 0, 0
}

func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

func (c *logCache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DeleteRange forgets the window if the range touches it; compaction of
// older entries leaves it alone.
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	if len(c.win) > 0 && max >= c.first && min < c.first+uint64(len(c.win)) {
		c.reset()
	}
	c.mu.Unlock()
	return c.store.DeleteRange(min, max)
}
