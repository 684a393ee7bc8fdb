package cluster

import (
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// releaseInterval is how often the raft log's resident pages are released
// (see fsm/release.go for the state file's). raft-boltdb reads and writes
// raft.db through bbolt's mmap; appending an entry rewrites the last leaf,
// which copies its older entries (up to four large ones per leaf) out of
// the map, so every page of a batch-heavy log ends up mapped: ~50 MiB of
// each agent's RSS with 420,000 jobs submitted in batches of 1,000. Only
// the newest entries are read again (and mostly from the log cache).
const releaseInterval = 10 * time.Second

// raftBolt is raft's log store and stable store (raft-boltdb) with every
// call that may remap the file (a write transaction can grow the map;
// Close unmaps it) under mu.RLock. releaseMapped takes mu.Lock, so the
// mapping it advises is still bbolt's and not memory since reused.
type raftBolt struct {
	*raftboltdb.BoltStore
	path string
	mu   sync.RWMutex

	stop, done chan struct{}
	once       sync.Once

	// appended counts the entries and data bytes stored since Open; the
	// size-based snapshot trigger reads it (compact.go).
	appended logVolume
}

var (
	_ raft.LogStore    = (*raftBolt)(nil)
	_ raft.StableStore = (*raftBolt)(nil)
)

func (b *raftBolt) StoreLog(l *raft.Log) error {
	return b.StoreLogs([]*raft.Log{l})
}

func (b *raftBolt) StoreLogs(ls []*raft.Log) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.BoltStore.StoreLogs(ls); err != nil {
		return err
	}
	n := b.appended.add(ls)
	// Counted here, under the log cache (which only passes its stores
	// through) and around raft-boltdb's one commit per call: exactly once
	// per append. StoreLog comes through here too.
	m := metrics().raftLog
	m.appends.Inc()
	m.entries.Add(float64(len(ls)))
	m.bytes.Add(float64(n))
	return nil
}

func (b *raftBolt) DeleteRange(lo, hi uint64) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.BoltStore.DeleteRange(lo, hi)
}

func (b *raftBolt) Set(k, v []byte) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.BoltStore.Set(k, v)
}

func (b *raftBolt) SetUint64(k []byte, v uint64) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.BoltStore.SetUint64(k, v)
}

// releaseMapped drops raft.db's pages from this process's page tables (the
// page cache keeps them; the next read maps them again).
func (b *raftBolt) releaseMapped() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return releaseFileMappings(b.path)
}

// startRelease runs releaseMapped every interval until Close.
func (b *raftBolt) startRelease(interval time.Duration, logger *slog.Logger) {
	if interval <= 0 || !canReleaseMappings {
		return
	}
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.done)
		for range ticks(interval, b.stop) {
			if err := b.releaseMapped(); err != nil {
				logger.Warn("cannot release the raft log's resident pages", "err", err)
			}
		}
	}()
}

// Close stops the release loop and closes the store; later calls are no-ops.
func (b *raftBolt) Close() error {
	var err error
	b.once.Do(func() {
		if b.stop != nil {
			close(b.stop)
			<-b.done
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		err = b.BoltStore.Close()
	})
	return err
}
