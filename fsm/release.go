package fsm

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Resident pages of the state file. bbolt reads through a shared read-only
// mmap of the file, and every page a transaction touched stays mapped, so
// the process's RSS grows with everything ever read or rewritten (bbolt
// copies a leaf's old contents out of the map when it rewrites it), plus
// the kernel's fault-around, which maps up to 16 neighbouring pages per
// fault. With 420,000 retained jobs that was 64–69 MiB of the state file
// in each agent's RSS although a wake reads a few pages. The pages are
// page cache, clean and shared: dropping them from the process's page
// tables (MADV_DONTNEED) loses nothing, and the next read maps them again
// from the cache with a minor fault. So the FSM releases the mapping every
// ReleaseInterval; the RSS left is the working set since the last release.

// DefaultReleaseInterval is how often Open's FSM releases the state file's
// resident pages.
const DefaultReleaseInterval = 10 * time.Second

// ReleaseMapped drops the state file's pages from this process's page
// tables (not from the page cache). Safe at any time: a read transaction
// holds bbolt's mmap lock, so the mapping cannot move while it is advised.
func (f *FSM) ReleaseMapped() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return ErrClosed
	}
	return f.db.View(func(tx *bolt.Tx) error {
		return releaseMapping(f.db.Info().Data, tx.Size())
	})
}

// startRelease runs ReleaseMapped every interval until stopRelease.
func (f *FSM) startRelease(interval time.Duration) {
	if interval <= 0 || !canReleaseMapping {
		return
	}
	f.releaseStop, f.releaseDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(f.releaseDone)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-f.releaseStop:
				return
			case <-t.C:
				if err := f.ReleaseMapped(); err != nil && err != ErrClosed {
					f.log.Warn("cannot release the state file's resident pages", "err", err)
				}
			}
		}
	}()
}

// stopRelease ends the loop and waits for it; call it without f.mu held.
func (f *FSM) stopRelease() {
	f.releaseOnce.Do(func() {
		if f.releaseStop != nil {
			close(f.releaseStop)
			<-f.releaseDone
		}
	})
}
