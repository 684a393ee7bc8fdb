package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/foreman-sched/foreman/fsm"
)

// File names inside Config.DataDir.
const (
	fsmFile       = "fsm.db"
	raftFile      = "raft.db"
	snapshotDir   = "snapshots"
	stateFile     = "cluster.json"
	snapshotsKept = 2
)

// HasRaftState reports whether dataDir holds a raft log: the agent that
// owns it has been a server.
func HasRaftState(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, raftFile))
	return err == nil
}

// CheckDataDir refuses, before anything opens it for writing, a data dir
// whose state file a newer foreman wrote (fsm.ErrNewerState, one line
// naming both versions); binary is this binary's version. A dir without a
// state file (new, or a client's) passes. It changes nothing.
func CheckDataDir(dataDir, binary string) error {
	path := filepath.Join(dataDir, fsmFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	v, err := fsm.ReadFileVersion(path)
	if err != nil {
		// Unreadable is OpenFSM's to judge (it rebuilds a corrupt file).
		return nil
	}
	return v.Newer("data dir "+dataDir, binary)
}

// OpenFSM opens the state file <dataDir>/fsm.db. A file that fsm reports as
// corrupt is moved aside (fsm.db.corrupt-<unix>) and a fresh one is opened:
// New then rebuilds it from the latest raft snapshot and raft replays the log
// after it. A file a newer foreman wrote is refused (fsm.ErrNewerState), not
// moved. Call it before New and pass the result in.
func OpenFSM(dataDir string, opts fsm.Options, logger *slog.Logger) (*fsm.FSM, error) {
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "cluster")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dataDir, fsmFile)
	f, err := fsm.Open(path, opts)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, fsm.ErrCorrupt) {
		return nil, err
	}
	aside := fmt.Sprintf("%s.corrupt-%d", path, time.Now().Unix())
	logger.Error("state file is corrupt; moving it aside and rebuilding from the raft snapshot and log",
		"path", path, "moved_to", aside, "err", err)
	if rerr := os.Rename(path, aside); rerr != nil {
		return nil, fmt.Errorf("move corrupt state file aside: %w (open failed: %v)", rerr, err)
	}
	return fsm.Open(path, opts)
}

// raftStorage is everything raft keeps on disk.
type raftStorage struct {
	bolt  *raftBolt
	logs  raft.LogStore
	snaps *raft.FileSnapshotStore
}

func openRaftStorage(dataDir string, noSync bool, logger *slog.Logger) (*raftStorage, error) {
	if logger == nil {
		logger = slog.Default()
	}
	path := filepath.Join(dataDir, raftFile)
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: noSync})
	if err != nil {
		return nil, fmt.Errorf("open raft log %s: %w", raftFile, err)
	}
	bolt := &raftBolt{BoltStore: store, path: path}
	logs := newLogCache(bolt, logCacheEntries, logCacheBytes)
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dataDir, snapshotDir), snapshotsKept, slogWriter(logger, "raft-snapshots"))
	if err != nil {
		bolt.Close()
		return nil, fmt.Errorf("raft snapshot store: %w", err)
	}
	bolt.startRelease(releaseInterval, logger)
	return &raftStorage{bolt: bolt, logs: logs, snaps: snaps}, nil
}

// hasState reports whether raft has ever been bootstrapped or joined here.
func (s *raftStorage) hasState() (bool, error) {
	return raft.HasExistingState(s.logs, s.bolt, s.snaps)
}

// restoreIfBehind restores the newest snapshot into f when f is older than
// it (a fresh or rebuilt state file). raft runs with
// NoSnapshotRestoreOnStart, so this is the only start-up restore; raft then
// replays the log after the snapshot and the FSM skips indexes it has.
func (s *raftStorage) restoreIfBehind(f *fsm.FSM, logger *slog.Logger) error {
	metas, err := s.snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	var lastErr error
	for _, meta := range metas { // newest first
		if meta.Index <= f.AppliedIndex() || s.onlyMarkersBetween(f.AppliedIndex(), meta.Index) {
			return nil
		}
		_, rc, err := s.snaps.Open(meta.ID)
		if err != nil {
			lastErr = err
			logger.Warn("cannot open snapshot; trying an older one", "snapshot", meta.ID, "err", err)
			continue
		}
		err = f.Restore(rc)
		if errors.Is(err, fsm.ErrNewerState) {
			// An older snapshot would go back in time under a log this
			// binary cannot replay either: stop, changing nothing more.
			return fmt.Errorf("snapshot %s: %w", meta.ID, err)
		}
		if err != nil {
			lastErr = err
			logger.Warn("cannot restore snapshot; trying an older one", "snapshot", meta.ID, "err", err)
			continue
		}
		logger.Info("restored state file from raft snapshot", "snapshot", meta.ID, "index", meta.Index)
		return nil
	}
	if lastErr != nil {
		return fmt.Errorf("restore state from snapshot: %w", lastErr)
	}
	return nil
}

// markerScanLimit bounds the log read by onlyMarkersBetween; beyond it a
// restore is cheaper to reason about than the scan.
const markerScanLimit = 4096

// onlyMarkersBetween reports whether every log entry in (from, to] is a
// barrier or no-op, which the FSM never sees: a snapshot taken while the log
// ended with commit pushes (commitpush.go) or read barriers has a higher
// index than the FSM's applied index but the same state, and restoring it
// again on every start would cost ~1 s per million jobs. A missing entry
// (compacted) answers false, and the snapshot is restored.
func (s *raftStorage) onlyMarkersBetween(from, to uint64) bool {
	if to-from > markerScanLimit {
		return false
	}
	var l raft.Log
	for i := from + 1; i <= to; i++ {
		if err := s.logs.GetLog(i, &l); err != nil {
			return false
		}
		if l.Type != raft.LogBarrier && l.Type != raft.LogNoop {
			return false
		}
	}
	return true
}

func (s *raftStorage) close() error { return s.bolt.Close() }
