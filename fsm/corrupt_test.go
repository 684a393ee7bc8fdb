package fsm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestCorruptFileDetected: files that cannot be trusted after an unclean
// shutdown give ErrCorrupt (the caller rebuilds from raft).
func TestCorruptFileDetected(t *testing.T) {
	// build leaves a crashed-looking file and returns its path and the
	// size its tree uses (the file itself is longer: bbolt preallocates).
	var treeSize int64
	build := func(t *testing.T) string {
		_, h := genLog(t, 5, 400)
		path := h.f.Path()
		_ = h.f.db.View(func(tx *bolt.Tx) error { treeSize = tx.Size(); return nil })
		// Leave the file as a crash would: no clean-shutdown flag.
		h.f.mu.Lock()
		h.f.closed = true
		if err := h.f.db.Close(); err != nil {
			t.Fatal(err)
		}
		h.f.mu.Unlock()
		return path
	}
	tests := []struct {
		name    string
		corrupt func(t *testing.T, path string)
	}{
		{"garbage file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("this is not a bolt file, not at all............................"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, treeSize/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage over the data pages", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			junk := make([]byte, treeSize-4*4096)
			for i := range junk {
				junk[i] = byte(i*7 + 3)
			}
			if _, err := f.WriteAt(junk, 4*4096); err != nil {
				t.Fatal(err)
			}
		}},
		{"both meta pages zeroed", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, 2*4096), 0); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := build(t)
			tc.corrupt(t, path)
			f, err := Open(path, Options{NoSync: true})
			if err == nil {
				f.Close()
				t.Fatalf("opened a corrupt file")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
	t.Run("unclean but intact opens", func(t *testing.T) {
		path := build(t)
		f, err := Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		f.Close()
	})
	t.Run("missing directory is not corruption", func(t *testing.T) {
		_, err := Open(filepath.Join(t.TempDir(), "no", "such", "state.db"), Options{})
		if err == nil || errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v, want a plain error", err)
		}
	})
}
