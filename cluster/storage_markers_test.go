package cluster

import (
	"testing"

	"github.com/hashicorp/raft"
)

// A snapshot whose index is ahead of the FSM only by barriers and no-ops is
// not restored again; a command, a configuration or a missing entry in the
// gap means the FSM is behind.
func TestOnlyMarkersBetween(t *testing.T) {
	s, err := openRaftStorage(t.TempDir(), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("x")},
		{Index: 3, Term: 1, Type: raft.LogBarrier},
		{Index: 4, Term: 1, Type: raft.LogNoop},
		{Index: 5, Term: 1, Type: raft.LogBarrier},
	}
	if err := s.logs.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to uint64
		want     bool
	}{
		{2, 5, true},
		{3, 4, true},
		{1, 5, false}, // the command at 2
		{0, 5, false}, // the configuration at 1
		{2, 6, false}, // 6 is missing
		{0, markerScanLimit + 1, false},
	} {
		if got := s.onlyMarkersBetween(tc.from, tc.to); got != tc.want {
			t.Errorf("onlyMarkersBetween(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
