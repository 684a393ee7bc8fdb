package fsm

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// The hand-written encoder writes byte for byte what encoding/json makes
// of the public shape, for events with every field set or empty, strings
// that need escaping (quotes, control characters, HTML characters, other
// runes, invalid UTF-8) and times from the zero time to the year 10000.
func TestEventJSONMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	strs := []string{"", "a", "01M8CCFED5YA8KVVE331NAQ3XE", `say "hi"`, `back\slash`, "tab\there", "nl\n",
		"<b>&amp;</b>", "naïve", "日本", "\u2028sep", "bad\xffutf8", "\x00", "~ok~ spaces"}
	pick := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return strs[rng.IntN(len(strs))]
	}
	types := []EventType{EventJob, EventAttempt, EventNode, EventLeader, EventSchedule, EventWorkflow, EventWebhook, EventReset}
	times := []time.Time{{}, time.Date(2026, 11, 26, 16, 54, 32, 101704850, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(2026, 6, 1, 12, 0, 0, 500, time.FixedZone("x", 3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := range 5000 {
		e := Event{
			Index: rng.Uint64N(1 << uint(rng.IntN(64))), Seq: rng.IntN(40), Type: types[rng.IntN(len(types))], Name: pick(),
			JobID: pick(), Attempt: rng.IntN(3), Node: pick(), State: pick(), Reason: pick(), Term: uint64(rng.IntN(3)),
			Workflow: pick(), Schedule: pick(), Namespace: pick(), At: times[rng.IntN(len(times))],
		}
		if i%50 == 0 {
			e.Seq = SeqAll
		}
		want, werr := json.Marshal(e.public())
		got, _ := e.MarshalJSON()
		if werr != nil {
			want = nil // encoding/json refuses it: so does the fallback
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("event %+v:\n got %s\nwant %s", e, got, want)
		}
		if werr != nil {
			continue
		}
		// And through the ring's frame.
		if f := encodeFrame(&e, 0); !bytes.Equal(f.frame[f.json:len(f.frame)-2], want) || !bytes.HasPrefix(f.frame, []byte("id: "+e.ID().String()+"\ndata: ")) {
			t.Fatalf("frame of %+v: %q", e, f.frame)
		}
	}
}

func BenchmarkEventFrame(b *testing.B) {
	e := Event{Index: 4598, Seq: 1, Type: EventAttempt, Name: "started", JobID: "01M8CCFED5YA8KVVE331NAQ3XE", Attempt: 1,
		Node: "vm", State: "running", At: time.Date(2026, 11, 26, 16, 54, 32, 102716395, time.UTC)}
	b.ReportAllocs()
	for b.Loop() {
		encodeFrame(&e, 0)
	}
}
