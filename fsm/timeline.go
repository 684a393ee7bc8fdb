package fsm

import (
	"encoding/binary"
	"fmt"
	"time"
)

// A job's timeline is every event of the job (its own transitions and its
// attempts'), kept in bucketJobEvents beside the job and deleted with it.
// It is written in the entry's transaction from the same events the
// stream publishes, so it is replicated state: part of StateHash and of
// snapshots, identical on every node.

// timelineRecord is one stored event; the key holds job ID, index and seq.
type timelineRecord struct {
	Type    EventType `json:"t"`
	Name    string    `json:"n,omitempty"`
	Attempt int       `json:"a,omitempty"`
	Node    string    `json:"o,omitempty"`
	State   string    `json:"s,omitempty"`
	Reason  string    `json:"r,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

func timelineKey(jobID string, index uint64, seq int) []byte {
	k := make([]byte, 0, len(jobID)+1+8+4)
	k = append(append(k, jobID...), '/')
	k = binary.BigEndian.AppendUint64(k, index)
	return binary.BigEndian.AppendUint32(k, uint32(seq))
}

func (a *applier) putTimeline(e *Event) error {
	r := timelineRecord{Type: e.Type, Name: e.Name, Attempt: e.Attempt, Node: e.Node, State: e.State, Reason: e.Reason, At: e.At}
	v, err := encodeByHand(&r, timelineRecordSize(&r), appendTimeline)
	if err != nil {
		return err
	}
	return a.put(a.timeline, timelineKey(e.JobID, e.Index, e.Seq), v)
}

// A job's every transition writes one to five timeline records, so they
// are encoded by hand: appendTimeline writes exactly what encode(r) writes
// (TestTimelineCodecMatchesEncode), in the codec's key order (shorter
// first, then bytewise: a, n, o, r, s, t, at).

// timelineRecordSize is enough room for r: 10 bytes of keys, at most 9
// bytes a head or an integer, a time of at most 30 bytes.
func timelineRecordSize(r *timelineRecord) int {
	return 128 + len(r.Type) + len(r.Name) + len(r.Node) + len(r.State) + len(r.Reason)
}

func appendTimeline(b []byte, r *timelineRecord) ([]byte, bool) {
	n := 1 // t
	for _, present := range [...]bool{r.Attempt != 0, r.Name != "", r.Node != "", r.Reason != "", r.State != "", !r.At.IsZero()} {
		if present {
			n++
		}
	}
	b = appendCBORHead(b, 5<<5, uint64(n))
	if r.Attempt != 0 {
		b = appendCBORInt(appendCBORText(b, "a"), int64(r.Attempt))
	}
	if r.Name != "" {
		b = appendCBORText(appendCBORText(b, "n"), r.Name)
	}
	if r.Node != "" {
		b = appendCBORText(appendCBORText(b, "o"), r.Node)
	}
	if r.Reason != "" {
		b = appendCBORText(appendCBORText(b, "r"), r.Reason)
	}
	if r.State != "" {
		b = appendCBORText(appendCBORText(b, "s"), r.State)
	}
	b = appendCBORText(appendCBORText(b, "t"), string(r.Type))
	if !r.At.IsZero() {
		b = appendCBORTime(appendCBORText(b, "at"), r.At)
	}
	return b, true
}

func (a *applier) deleteTimeline(jobID string) error {
	prefix := attemptPrefix(jobID)
	c := a.timeline.Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := a.del(a.timeline, k); err != nil {
			return err
		}
	}
	return nil
}

// JobEvents returns a job's timeline, oldest first (empty for a job that
// has none, e.g. one submitted before timelines existed).
func (t *Tx) JobEvents(jobID string) ([]Event, error) {
	var out []Event
	prefix := attemptPrefix(jobID)
	c := t.tx.Bucket(bucketJobEvents).Cursor()
	for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
		rest := k[len(prefix):]
		if len(rest) != 12 {
			return nil, fmt.Errorf("%w: timeline key %q", ErrCorrupt, k)
		}
		var r timelineRecord
		if err := decode(v, &r); err != nil {
			return nil, err
		}
		out = append(out, Event{
			Index: binary.BigEndian.Uint64(rest), Seq: int(binary.BigEndian.Uint32(rest[8:])),
			Type: r.Type, Name: r.Name, JobID: jobID, Attempt: r.Attempt, Node: r.Node,
			State: r.State, Reason: r.Reason, At: r.At,
		})
	}
	return out, nil
}
