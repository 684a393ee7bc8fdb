package bench

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
)

// Every event is counted once, however the body is split into reads.
func TestCountEventIDs(t *testing.T) {
	body := ": foreman events from n1\n\n" +
		"id: 4597-0\ndata: {\"id\":\"4597-0\"}\n\n" +
		": heartbeat\n\n" +
		"id: 4598-0\ndata: {\"reason\":\"not an\\nid: line\"}\n\n" +
		"id: 4598-1\nevent: reset\ndata: {}\n\n"
	var n atomic.Int64
	countEventIDs(strings.NewReader(body), &n)
	if n.Load() != 3 {
		t.Errorf("one read: %d events, want 3", n.Load())
	}
	n.Store(0)
	countEventIDs(iotest.OneByteReader(strings.NewReader(body)), &n)
	if n.Load() != 3 {
		t.Errorf("one byte per read: %d events, want 3", n.Load())
	}
	n.Store(0)
	countEventIDs(iotest.HalfReader(strings.NewReader(strings.Repeat(body, 1000))), &n)
	if n.Load() != 3000 {
		t.Errorf("half reads: %d events, want 3000", n.Load())
	}
}
