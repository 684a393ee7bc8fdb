package fsm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// Snapshot opens a read transaction (cheap, and consistent with the
// applied index because raft calls it between applies) and leaves the
// copying to Persist, which runs concurrently with Apply.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return nil, ErrClosed
	}
	tx, err := f.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("begin snapshot: %w", err)
	}
	return &snapshot{tx: tx}, nil
}

// snapshot streams a bbolt file image of one read transaction. bbolt's
// read transactions do not block writers (unless the mmap must grow, which
// DefaultInitialMmapSize makes rare).
type snapshot struct {
	tx   *bolt.Tx
	once sync.Once
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	defer s.Release()
	if _, err := s.tx.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() { s.once.Do(func() { _ = s.tx.Rollback() }) }

// Restore replaces the whole state with a snapshot stream: it writes a
// temporary file beside the state file, syncs it, checks that it opens,
// renames it over the state file and reopens. Afterwards AppliedIndex is
// the snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	tmp := f.path + ".restore"
	if err := writeSynced(tmp, rc); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("restore: %w", err)
	}
	// Validate before touching the live file.
	opts := f.opts
	opts.restoring = true
	probe, err := openDB(tmp, opts, f.log)
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("restore: snapshot is unusable: %w", err)
	}
	if err := closeClean(probe); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("restore: %w", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = os.Remove(tmp)
		return ErrClosed
	}
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("restore: close current state: %w", err)
	}
	renameErr := os.Rename(tmp, f.path)
	if renameErr == nil {
		renameErr = syncDir(filepath.Dir(f.path))
	}
	// Reopen whichever file is now in place, so a failed restore leaves
	// the FSM usable at its old state.
	db, err := openDB(f.path, opts, f.log)
	if err != nil {
		f.closed = true
		return fmt.Errorf("restore: reopen: %w", errors.Join(renameErr, err))
	}
	if renameErr != nil {
		f.db = db
		return fmt.Errorf("restore: %w", renameErr)
	}
	f.db = db
	f.loadApplied()
	f.nodes.beginWrite(nil, true, f.applied.Load()) // the node records changed with everything else
	f.nodes.endWrite()
	f.lives.beginWrite(nil, true, f.applied.Load()) // and the live attempts
	f.lives.endWrite()
	idx := f.applied.Load()
	f.log.Info("state restored from snapshot", "applied_index", idx)
	f.notify.publish([]Event{{Index: idx, Type: EventReset}})
	f.events.reset(idx)
	return nil
}

func writeSynced(path string, r io.Reader) (err error) {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := io.Copy(out, r); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return errors.Join(errors.New("sync snapshot copy"), err)
	}
	return nil
}
