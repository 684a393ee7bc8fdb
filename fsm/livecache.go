package fsm

import (
	"bytes"
	"maps"
	"slices"
	"sync"
)

// liveCache memoizes the decoded records of live attempts for the scans of
// the live index (LiveAttempts, LiveAttemptsOnNode). Every node's worker
// scans its live attempts after applied entries (paced to ~a quarter of a
// core) and the scheduler scans all of them: with thousands of queued
// attempts, decoding each record again on every scan was a tenth of an
// agent's CPU during a no-op throughput run, though between two scans only
// the few attempts that changed differ.
//
// A cached record is used only when the stored bytes are equal to the bytes
// it was decoded from, so the cache can never return anything the state
// does not hold (after a Restore too); it is a read-path memo and never
// touches Apply. Each scan of a prefix replaces that prefix's map with the
// records it met, so the cache holds about what the last scans read.
type liveCache struct {
	mu       sync.Mutex
	byPrefix map[string]map[string]*liveEntry
}

type liveEntry struct {
	raw []byte
	at  Attempt
}

// take removes and returns the prefix's map (nil if none, or while
// another scan of the prefix holds it: that scan then decodes everything).
func (c *liveCache) take(prefix []byte) map[string]*liveEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.byPrefix[string(prefix)]
	delete(c.byPrefix, string(prefix))
	return m
}

// put stores the map a complete scan of prefix built.
func (c *liveCache) put(prefix []byte, m map[string]*liveEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byPrefix == nil {
		c.byPrefix = map[string]map[string]*liveEntry{}
	}
	c.byPrefix[string(prefix)] = m
}

// attempt returns the attempt stored as v under key: from old when v is
// the bytes it was decoded from, else decoded now. It records the entry in
// next. The caller owns the returned copy.
func (c *liveCache) attempt(old, next map[string]*liveEntry, key, v []byte) (Attempt, error) {
	e := old[string(key)]
	if e == nil || !bytes.Equal(e.raw, v) {
		e = &liveEntry{raw: bytes.Clone(v)}
		if err := decodeAttempt(v, &e.at); err != nil {
			return Attempt{}, err
		}
	}
	next[string(key)] = e
	return copyAttempt(&e.at), nil
}

// copyAttempt is a deep copy: the caller may change what it gets.
func copyAttempt(a *Attempt) Attempt {
	out := *a
	if a.ExitCode != nil {
		x := *a.ExitCode
		out.ExitCode = &x
	}
	if a.Resources.Named != nil {
		out.Resources.Named = maps.Clone(a.Resources.Named)
	}
	if a.Task != nil {
		t := *a.Task
		t.Peers = slices.Clone(a.Task.Peers)
		out.Task = &t
	}
	if a.GPUShare != nil {
		g := *a.GPUShare
		out.GPUShare = &g
	}
	return out
}
