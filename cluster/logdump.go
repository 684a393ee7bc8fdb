package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrLogInUse: the raft log is open in a running agent, which holds its lock.
var ErrLogInUse = errors.New("the raft log is in use: stop the agent first (it holds the file's lock)")

// ReadLog calls fn with each entry of the raft log in dataDir whose index
// is in [from, to] (0: no bound), in order, reading the file without
// changing it. For a stopped agent: a running one holds the log's lock
// (ErrLogInUse).
func ReadLog(dataDir string, from, to uint64, fn func(*raft.Log) error) error {
	path := filepath.Join(dataDir, raftFile)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no raft log in %s: %w", dataDir, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{ReadOnly: true, Timeout: time.Second}})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return ErrLogInUse
	}
	if err != nil {
		return fmt.Errorf("open raft log %s: %w", path, err)
	}
	defer store.Close()
	first, err := store.FirstIndex()
	if err != nil {
		return err
	}
	last, err := store.LastIndex()
	if err != nil {
		return err
	}
	lo, hi := max(from, first), last
	if to != 0 {
		hi = min(to, last)
	}
	for i := lo; i <= hi && i != 0; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if err := fn(&l); err != nil {
			return err
		}
	}
	return nil
}
