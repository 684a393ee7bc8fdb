package cluster

import (
	"encoding/json"
	"testing"
)

// TestBeatSeqReadsWhatClientsWrite: the decoder-free path reads the beats
// clients encode, and leaves every other line to the JSON decoder.
func TestBeatSeqReadsWhatClientsWrite(t *testing.T) {
	for _, seq := range []uint64{1, 42, 1 << 62} {
		b, err := json.Marshal(UpFrame{Type: UpFrameBeat, Seq: seq})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := beatSeq(b); !ok || got != seq {
			t.Errorf("beatSeq(%s) = %d, %v; want %d, true", b, got, ok, seq)
		}
	}
	for _, line := range []string{
		`{"type":"beat","seq":0}`, `{"type":"beat","seq":-1}`, `{"type":"beat","seq":1.5}`,
		`{"type":"beat","seq":1} `, `{"seq":1,"type":"beat"}`, `{"type":"leave"}`, `{"type":"beat","seq":}`,
		`{"type":"beat","seq":99999999999999999999}`,
	} {
		if got, ok := beatSeq([]byte(line)); ok {
			t.Errorf("beatSeq(%s) = %d, true; want it left to the decoder", line, got)
		}
	}
}
