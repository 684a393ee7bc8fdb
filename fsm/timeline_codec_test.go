package fsm

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The hand-written timeline record is exactly what encode writes, for
// records at the codec's edges (strings empty, long or not UTF-8, integers
// at the CBOR head bounds, zero and zoned times).
func TestTimelineCodecMatchesEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	e := edgeValues{rng}
	for range 5000 {
		r := timelineRecord{Type: EventType(e.str()), Name: e.str(), Attempt: int(e.i64()), Node: e.str(),
			State: e.str(), Reason: e.str(), At: e.tm()}
		want, err := encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendTimeline(nil, &r)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("%+v:\nhand writer %x (%v)\nencode      %x", r, got, ok, want)
		}
		if len(got) > timelineRecordSize(&r) {
			t.Fatalf("%+v: %d bytes > size %d", r, len(got), timelineRecordSize(&r))
		}
	}
}
