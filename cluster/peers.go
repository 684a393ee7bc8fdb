package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// persistedState is <data>/cluster.json: what a restarted node needs before
// raft and gossip are up. The cluster ID lets gossip refuse a foreign
// cluster at once; the peers let a node restarted with no --join flags find
// its cluster again.
type persistedState struct {
	ClusterID string   `json:"cluster_id,omitempty"`
	Peers     []string `json:"peers,omitempty"` // gossip host:port of other members
}

type stateStore struct {
	path string
	mu   sync.Mutex
	cur  persistedState
}

func loadStateStore(dataDir string) (*stateStore, error) {
	s := &stateStore{path: filepath.Join(dataDir, stateFile)}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stateFile, err)
	}
	if err := json.Unmarshal(b, &s.cur); err != nil {
		// Only a convenience: the cluster ID comes back with the log and the
		// peers with gossip. Start from empty rather than refuse to start.
		s.cur = persistedState{}
	}
	return s, nil
}

func (s *stateStore) get() persistedState {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	c.Peers = append([]string(nil), s.cur.Peers...)
	return c
}

// update applies fn and writes the file atomically if anything changed.
func (s *stateStore) update(fn func(*persistedState)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.cur
	next.Peers = append([]string(nil), s.cur.Peers...)
	fn(&next)
	sort.Strings(next.Peers)
	a, _ := json.Marshal(s.cur)
	b, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return err
	}
	if c, _ := json.Marshal(next); string(a) == string(c) {
		return nil
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", stateFile, err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("write %s: %w", stateFile, err)
	}
	s.cur = next
	return nil
}
