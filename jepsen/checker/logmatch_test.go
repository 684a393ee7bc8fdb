package checker

import "testing"

func TestLogMatching(t *testing.T) {
	e := func(term uint64, b byte, d string) LogEntry { return LogEntry{Term: term, Sum: [32]byte{b}, Desc: d} }
	common := map[uint64]LogEntry{1: e(1, 1, "config"), 2: e(2, 2, "noop"), 3: e(2, 3, "place")}
	n1 := NodeLog{Node: "n1", Applied: 4, Entries: map[uint64]LogEntry{1: common[1], 2: common[2], 3: common[3], 4: e(3, 4, "noop")}}
	n2 := NodeLog{Node: "n2", Applied: 4, Entries: map[uint64]LogEntry{1: common[1], 2: common[2], 3: common[3], 4: e(3, 4, "noop")}}
	// n3 applied only 3; its 4th entry (a deposed leader's, uncommitted) differs.
	n3 := NodeLog{Node: "n3", Applied: 3, Entries: map[uint64]LogEntry{1: common[1], 2: common[2], 3: common[3], 4: e(2, 9, "report")}}
	if r := LogMatching([]NodeLog{n1, n2, n3}); !r.Valid || r.Stats["entries_compared"] != 4+3+3 {
		t.Fatalf("agreeing logs: %v", r)
	}
	// What the jepsen run found: the same index and term, different entries.
	n3.Applied, n3.Entries[4] = 4, e(3, 9, "report")
	if r := LogMatching([]NodeLog{n1, n2, n3}); r.Valid || len(r.Errors) != 2 {
		t.Fatalf("diverged logs passed or were misreported: %v", r)
	}
	// Entries compacted away on one side are skipped, not failed.
	delete(n2.Entries, 1)
	n3.Entries[4] = e(3, 4, "noop")
	if r := LogMatching([]NodeLog{n1, n2, n3}); !r.Valid {
		t.Fatalf("a compacted prefix failed the check: %v", r)
	}
}
