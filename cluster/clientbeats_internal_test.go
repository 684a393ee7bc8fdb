package cluster

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkHeardByServer: the leader's count of 5,000 clients' streams
// per server, as every GET /v1/cluster/raft, /v1/cluster/members and
// metrics scrape on the leader makes it (the relay waits for its lock).
func BenchmarkHeardByServer(b *testing.B) {
	h := newHeardClients()
	now := time.Now()
	beats := make([]ClientBeat, 5000)
	for i := range beats {
		beats[i] = ClientBeat{Node: fmt.Sprintf("c%04d", i), Seq: 1, AgeMS: int64(i % 3000)}
	}
	for s := range 3 {
		h.take(beats[s*len(beats)/3:(s+1)*len(beats)/3], fmt.Sprintf("s%d", s), now)
	}
	b.ResetTimer()
	for b.Loop() {
		if m := h.byServer(now, 8*time.Second); len(m) != 3 {
			b.Fatalf("%v", m)
		}
	}
}
