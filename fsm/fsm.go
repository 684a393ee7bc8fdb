package fsm

// This file opens the state file: Open, Options and the FSM type that
// raft drives (Apply, Snapshot, Restore live in their own files).

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Options configures Open.
type Options struct {
	// NoSync skips fsync on every commit. Raft's log is the durable source
	// of truth: after a crash the file is checked and, if unusable, rebuilt
	// from the snapshot and log (see DESIGN.md).
	NoSync bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Version is this binary's foreman version, recorded in the file as
	// its writer (version.go) so that an older binary that refuses the
	// file can say which version wrote it. Empty: not recorded.
	Version string
	// InitialMmapSize is the address space bbolt maps up front. A large
	// value keeps writers from waiting on a remap while a long snapshot
	// read transaction is open. Zero means DefaultInitialMmapSize.
	InitialMmapSize int
	// ReleaseInterval is how often the state file's resident pages are
	// dropped from the process's page tables (release.go). Zero means
	// DefaultReleaseInterval; negative, never.
	ReleaseInterval time.Duration
	// EventBuffer is how many recent events the node keeps for stream
	// readers (EventRing). Zero means DefaultEventBuffer.
	EventBuffer int
	// restoring: the file is a raft snapshot from the leader, whose
	// node-local meta names the leader's binary. Its features are not
	// refused: state of a feature exists only once every server
	// advertised it (the gate), this one included.
	restoring bool
}

// DefaultInitialMmapSize is 1 GiB of address space (not memory).
const DefaultInitialMmapSize = 1 << 30

// openTimeout bounds the wait for the file lock held by another process.
const openTimeout = 5 * time.Second

// FSM is the replicated state machine. Apply/ApplyBatch/Snapshot/Restore
// are called by raft from one goroutine; View, Watch, Subscribe and
// StateHash are safe from any goroutine.
type FSM struct {
	path   string
	opts   Options
	log    *slog.Logger
	mu     sync.RWMutex // guards db (swapped by Restore) and closed
	db     *bolt.DB
	closed bool

	applied atomic.Uint64
	notify  notifier
	events  *EventRing  // recent events for the stream (eventring.go)
	live    liveCache   // decoded live attempts for the read path (livecache.go)
	lives   liveSetMemo // every live attempt, for the scheduler's plans (liveset.go)
	nodes   nodeCache   // decoded node records for the read path (nodecache.go)

	releaseStop, releaseDone chan struct{}
	releaseOnce              sync.Once

	// faultHook, set only by tests, may refuse an entry after its handler
	// wrote, to exercise the rollback-and-redo path.
	faultHook func(index uint64) error
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// Open opens (or creates) the state file at path. An unusable file gives an
// error wrapping ErrCorrupt; the caller then removes it and rebuilds.
func Open(path string, opts Options) (*FSM, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.InitialMmapSize == 0 {
		opts.InitialMmapSize = DefaultInitialMmapSize
	}
	if opts.ReleaseInterval == 0 {
		opts.ReleaseInterval = DefaultReleaseInterval
	}
	f := &FSM{path: path, opts: opts, log: opts.Logger.With("component", "fsm")}
	db, err := openDB(path, opts, f.log)
	if err != nil {
		return nil, err
	}
	f.db = db
	f.loadApplied()
	f.events = newEventRing(opts.EventBuffer, f.applied.Load())
	f.notify.init()
	f.startRelease(opts.ReleaseInterval)
	return f, nil
}

func boltOptions(opts Options) *bolt.Options {
	return &bolt.Options{
		Timeout: openTimeout,
		NoSync:  opts.NoSync,
		// The freelist is synced: rebuilding it at open walks the tree in a
		// bbolt goroutine that panics (unrecoverably) on a corrupt page.
		NoFreelistSync:  false,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: opts.InitialMmapSize,
	}
}

// openDB opens the file, checks it when the last shutdown was not clean,
// clears the clean flag (durably) and makes sure every bucket exists.
func openDB(path string, opts Options, log *slog.Logger) (db *bolt.DB, err error) {
	existed := false
	var size int64
	if st, statErr := os.Stat(path); statErr == nil {
		existed = st.Size() > 0
		size = st.Size()
	}
	// Reading a page past the end of a truncated mapped file is a SIGBUS;
	// make it a panic we can recover in this goroutine (bbolt's Open reads
	// the meta and freelist pages here). A panic mid-Open may leak the
	// file handle; the caller moves the file aside anyway.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		// bbolt panics on some kinds of garbage; that is a corrupt file,
		// not a reason to crash the agent.
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			db, err = nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, boltOptions(opts))
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) || errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open state file %s: %w", path, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if existed {
		// A newer binary's file is refused before anything else reads or
		// writes it: not corrupt (nothing moves it aside), not ours.
		var have FileVersion
		verr := db.View(func(tx *bolt.Tx) error {
			var err error
			have, err = readFileVersion(tx)
			return err
		})
		if verr == nil {
			verr = have.newer(path, opts.Version, !opts.restoring)
		}
		if verr != nil {
			_ = db.Close()
			return nil, verr
		}
		if err := checkFile(db, size, log); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
		}
	}
	err = db.Update(func(tx *bolt.Tx) error {
		// Read before the loop below creates the buckets; the indexes are
		// filled after any record migration, from records this binary reads.
		rebuild := !haveSchedIndexes(tx)
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		have, err := readFileVersion(tx)
		if err != nil {
			return err
		}
		if err := have.newer(path, opts.Version, !opts.restoring); err != nil {
			return err // checked before the Update too; here for a file that changed since
		}
		switch have.Schema {
		case 0: // a new file
			if err := meta.Put(metaSchemaVersion, []byte(strconv.Itoa(SchemaVersion))); err != nil {
				return err
			}
		case 1:
			log.Info("upgrading state file from schema 1 (JSON records) to 2 (CBOR)", "path", path)
			if err := migrateV1(tx); err != nil {
				return err
			}
			rebuild = true
			if err := meta.Put(metaSchemaVersion, []byte(strconv.Itoa(SchemaVersion))); err != nil {
				return err
			}
		}
		if err := recordVersion(meta, have, opts.Version); err != nil {
			return err
		}
		if !bytes.Equal(meta.Get(metaGroupVersion), groupVersion) {
			rebuild = true
		}
		if rebuild {
			if err := rebuildSchedIndexes(tx); err != nil {
				return err
			}
			if err := meta.Put(metaGroupVersion, groupVersion); err != nil {
				return err
			}
		}
		return meta.Delete(metaCleanShutdown)
	})
	if err == nil {
		// The missing flag must be on disk before any NoSync commit, so
		// a crash from here on is always detected at the next Open.
		err = db.Sync()
	}
	if err != nil {
		_ = db.Close()
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, fmt.Errorf("prepare state file %s: %w", path, err)
	}
	return db, nil
}

// checkFile runs bbolt's consistency check unless the file was closed
// cleanly. It first makes sure the file is as long as the tree claims:
// reading a page past the end of a mapped file is a SIGBUS, not an error.
func checkFile(db *bolt.DB, fileSize int64, log *slog.Logger) error {
	return db.View(func(tx *bolt.Tx) error {
		if tx.Size() > fileSize {
			return fmt.Errorf("file is %d bytes but its tree needs %d (truncated)", fileSize, tx.Size())
		}
		if meta := tx.Bucket(bucketMeta); meta != nil && meta.Get(metaCleanShutdown) != nil {
			return nil
		}
		log.Warn("state file was not closed cleanly; checking it", "path", db.Path(), "bytes", fileSize)
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}

func (f *FSM) loadApplied() {
	_ = f.db.View(func(tx *bolt.Tx) error {
		f.applied.Store(readU64(tx.Bucket(bucketMeta).Get(metaAppliedIndex)))
		return nil
	})
}

// AppliedIndex is the raft index of the last entry applied (or restored).
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Path is the state file's location.
func (f *FSM) Path() string { return f.path }

// Close records a clean shutdown (so the next Open skips the check), syncs
// and closes the file. Subscriptions are closed.
func (f *FSM) Close() error {
	f.stopRelease()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	f.notify.closeAll()
	return closeClean(f.db)
}

// closeClean sets the clean-shutdown flag durably and closes db.
func closeClean(db *bolt.DB) error {
	err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaCleanShutdown, []byte("1"))
	})
	if err == nil {
		err = db.Sync()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes a rename durable.
func syncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
