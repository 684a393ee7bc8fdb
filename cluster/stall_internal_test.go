package cluster

import (
	"testing"
	"time"
)

func TestStallWatch(t *testing.T) {
	s := NewStallWatch()
	t0 := s.base.Add(time.Second)
	if s.Fresh(t0) {
		t.Fatal("fresh before the first poll")
	}
	if _, stalled := s.Poll(t0); stalled {
		t.Fatal("the first poll is a stall")
	}
	if !s.Fresh(t0.Add(syncPoll)) {
		t.Fatal("not fresh one poll interval after a poll")
	}
	if _, stalled := s.Poll(t0.Add(syncPoll)); stalled {
		t.Fatal("a regular poll is a stall")
	}
	resumed := t0.Add(syncPoll + 12*time.Second) // a SIGSTOP of 12 s
	if s.Fresh(resumed) {
		t.Fatal("fresh 12 s after the last poll: a worker would start from a stale FSM")
	}
	gap, stalled := s.Poll(resumed)
	if !stalled || gap != 12*time.Second {
		t.Fatalf("poll after 12 s: gap %v stalled %v, want 12s true", gap, stalled)
	}
	if !s.Fresh(resumed.Add(StallLimit)) || s.Fresh(resumed.Add(StallLimit+time.Millisecond)) {
		t.Fatal("fresh must hold for exactly StallLimit after a poll")
	}
}

// TestInSyncFalseAfterStall: a node whose sync loop has not polled for
// longer than StallLimit is not in sync, whatever its flag says.
func TestInSyncFalseAfterStall(t *testing.T) {
	n := &Node{stalls: &StallWatch{base: time.Now().Add(-time.Hour)}}
	n.inSync.Store(true)
	n.stalls.Poll(time.Now())
	if !n.InSync() {
		t.Fatal("not in sync right after a poll")
	}
	n.stalls.last.Store(1) // the last poll an hour ago: the process stalled since
	if n.InSync() {
		t.Fatal("in sync although the sync loop has not polled for an hour")
	}
}
