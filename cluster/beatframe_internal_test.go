package cluster

import (
	"encoding/json"
	"testing"
)

// TestBeatSeqReadsWhatClientsWrite: the decoder-free path reads the beats
// clients encode, with and without the announced interval, and leaves
// every other line to the JSON decoder (which refuses what it must).
func TestBeatSeqReadsWhatClientsWrite(t *testing.T) {
	for _, seq := range []uint64{1, 42, 1 << 62} {
		for _, every := range []int64{0, 3000, ClientIdleBeatInterval.Milliseconds()} {
			b, err := json.Marshal(UpFrame{Type: UpFrameBeat, Seq: seq, EveryMS: every})
			if err != nil {
				t.Fatal(err)
			}
			if got, gotEvery, ok := beatSeq(b); !ok || got != seq || gotEvery != every {
				t.Errorf("beatSeq(%s) = %d, %d, %v; want %d, %d, true", b, got, gotEvery, ok, seq, every)
			}
		}
	}
	for _, line := range []string{
		`{"type":"beat","seq":0}`, `{"type":"beat","seq":-1}`, `{"type":"beat","seq":1.5}`,
		`{"type":"beat","seq":1} `, `{"seq":1,"type":"beat"}`, `{"type":"leave"}`, `{"type":"beat","seq":}`,
		`{"type":"beat","seq":99999999999999999999}`,
		`{"type":"beat","seq":1,"every_ms":}`, `{"type":"beat","seq":1,"every_ms":-5}`,
		`{"type":"beat","seq":1,"every_ms":9001}`, `{"type":"beat","seq":1,"every_ms":3000,"every_ms":1}`,
	} {
		if got, _, ok := beatSeq([]byte(line)); ok {
			t.Errorf("beatSeq(%s) = %d, true; want it left to the decoder", line, got)
		}
	}
}
