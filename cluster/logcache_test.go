package cluster

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// countingStore counts the reads that reach the store behind the cache.
type countingStore struct {
	*raft.InmemStore
	gets int
}

func (s *countingStore) GetLog(idx uint64, l *raft.Log) error {
	s.gets++
	return s.InmemStore.GetLog(idx, l)
}

func entry(idx uint64, size int) *raft.Log {
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(idx)}, size)}
}

func TestLogCacheBounds(t *testing.T) {
	for _, tc := range []struct {
		name                string
		maxEntries, maxSize int
		sizes               []int // entries 1..n, stored one call each
		cached              []uint64
	}{
		{"all fit", 10, 1 << 20, []int{100, 100, 100}, []uint64{1, 2, 3}},
		{"entry bound", 2, 1 << 20, []int{100, 100, 100}, []uint64{2, 3}},
		{"byte bound", 100, 1000, []int{400, 400, 400}, []uint64{2, 3}},
		{"oversized entry is not kept", 100, 1000, []int{100, 5000}, nil},
		{"oversized entry then small", 100, 1000, []int{5000, 100}, []uint64{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &countingStore{InmemStore: raft.NewInmemStore()}
			c := newLogCache(st, tc.maxEntries, tc.maxSize)
			for i, n := range tc.sizes {
				if err := c.StoreLogs([]*raft.Log{entry(uint64(i+1), n)}); err != nil {
					t.Fatal(err)
				}
			}
			var hits []uint64
			for i := range tc.sizes {
				idx := uint64(i + 1)
				before := st.gets
				var l raft.Log
				if err := c.GetLog(idx, &l); err != nil {
					t.Fatalf("GetLog(%d): %v", idx, err)
				}
				if l.Index != idx || len(l.Data) != tc.sizes[i] || (len(l.Data) > 0 && l.Data[0] != byte(idx)) {
					t.Fatalf("GetLog(%d) = index %d, %d bytes", idx, l.Index, len(l.Data))
				}
				if st.gets == before {
					hits = append(hits, idx)
				}
			}
			if fmt.Sprint(hits) != fmt.Sprint(tc.cached) {
				t.Fatalf("served from the cache: %v, want %v", hits, tc.cached)
			}
			if c.bytes > tc.maxSize || len(c.win) > tc.maxEntries {
				t.Fatalf("cache holds %d entries, %d bytes; bounds %d, %d", len(c.win), c.bytes, tc.maxEntries, tc.maxSize)
			}
		})
	}
}

// A rewrite after a conflict (raft deletes the suffix, then stores new
// entries at the same indexes) must never serve the old entries.
func TestLogCacheRewrite(t *testing.T) {
	st := &countingStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(st, 100, 1<<20)
	for i := uint64(1); i <= 5; i++ {
		if err := c.StoreLog(entry(i, 10)); err != nil {
			t.Fatal(err)
		}
	}
	// Compaction below the window keeps it.
	if err := c.DeleteRange(0, 0); err != nil {
		t.Fatal(err)
	}
	if len(c.win) != 5 {
		t.Fatalf("compaction below the window dropped it: %d entries left", len(c.win))
	}
	if err := c.DeleteRange(4, 5); err != nil {
		t.Fatal(err)
	}
	rewritten := &raft.Log{Index: 4, Term: 2, Type: raft.LogCommand, Data: []byte("new")}
	if err := c.StoreLog(rewritten); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := c.GetLog(4, &l); err != nil || l.Term != 2 || string(l.Data) != "new" {
		t.Fatalf("GetLog(4) after rewrite = term %d %q, %v", l.Term, l.Data, err)
	}
	if err := c.GetLog(5, &l); err == nil {
		t.Fatalf("GetLog(5) after its deletion = term %d, want an error", l.Term)
	}
	// A store that does not extend the window starts a new one.
	if err := c.StoreLog(entry(9, 10)); err != nil {
		t.Fatal(err)
	}
	if c.first != 9 || len(c.win) != 1 {
		t.Fatalf("window after a gap = [%d, +%d), want [9, +1)", c.first, len(c.win))
	}
}
