package fsm

import (
	"sync"
	"sync/atomic"
)

// DefaultEventBuffer is how many events a node keeps for stream readers.
const DefaultEventBuffer = 16384

// EventRing holds this node's most recent events for stream readers (the
// SSE endpoint). Apply appends after each commit and never waits for a
// reader: readers keep their own position and come back for more; one
// that falls further behind than the ring holds is told so (Read's ok is
// false) and must re-list. Memory is the ring, whatever the number of
// readers, so a reader that stops reading costs nothing here.
//
// Positions are absolute counts of appended events; the ring holds
// positions [start, next). Each slot memoizes its encoding (the whole SSE
// frame), so a hundred readers encode an event once and write the same
// bytes.
type EventRing struct {
	mu    sync.RWMutex // readers share it; append holds it briefly
	encMu sync.Mutex   // one reader encodes a slot, the others wait for its memo
	slots []ringSlot
	start uint64 // oldest position held
	next  uint64 // position of the next event
	// floor: every event after it is in the ring or was dropped from its
	// front (then start moved past it). A reader resuming at or after
	// floor misses nothing the ring still holds.
	floor   EventID
	changed chan struct{} // closed (and replaced) by every append or reset
	counts  map[eventKind]uint64
	// nsSeen holds the namespaces counted under their own name; from
	// MaxMetricNamespaces on, new ones count as OtherNamespace, so the
	// metrics' namespace label stays bounded.
	nsSeen map[string]bool
}

// eventKind keys the counts without building Kind's string per event.
type eventKind struct {
	typ  EventType
	name string
	ns   string // the event's namespace (stored form), or OtherNamespace
}

// MaxMetricNamespaces bounds the namespaces the event counts (and so the
// metrics' namespace label) name one by one; the rest are OtherNamespace.
const MaxMetricNamespaces = 100

// OtherNamespace is the metrics label of namespaces beyond
// MaxMetricNamespaces.
const OtherNamespace = "_other"

type ringSlot struct {
	ev   Event
	json atomic.Pointer[ringJSON]
}

// ringJSON is a slot's memoized encoding, tagged with its position so a
// memo written late for an overwritten slot is never taken for the new one.
type ringJSON struct {
	pos   uint64
	frame []byte // "id: ID\ndata: JSON\n\n"
	json  int    // where the JSON starts in frame
}

// RingEvent is an event read from the ring with its encodings, shared
// between readers: never modify them.
type RingEvent struct {
	Event
	JSON []byte
	// Frame is the event as one Server-Sent Events message:
	// "id: ID\ndata: JSON\n\n".
	Frame []byte
}

// encodeFrame encodes e once for every reader.
func encodeFrame(e *Event, pos uint64) *ringJSON {
	frame := make([]byte, 0, 320)
	frame = append(frame, "id: "...)
	frame = e.ID().appendTo(frame)
	frame = append(frame, "\ndata: "...)
	at := len(frame)
	frame = e.appendJSON(frame)
	frame = append(frame, "\n\n"...)
	return &ringJSON{pos: pos, frame: frame, json: at}
}

func (m *ringJSON) set(out *RingEvent) {
	out.Frame = m.frame
	out.JSON = m.frame[m.json : len(m.frame)-2]
}

func newEventRing(size int, floor uint64) *EventRing {
	if size < 1 {
		size = DefaultEventBuffer
	}
	return &EventRing{
		slots:   make([]ringSlot, size),
		floor:   EventID{Index: floor, Seq: SeqAll},
		changed: make(chan struct{}),
		counts:  map[eventKind]uint64{},
		nsSeen:  map[string]bool{},
	}
}

// append adds a committed batch's events.
func (r *EventRing) append(events []Event) {
	if len(events) == 0 {
		return
	}
	r.mu.Lock()
	for i := range events {
		e := &events[i]
		if r.next-r.start == uint64(len(r.slots)) {
			r.floor = r.slots[r.start%uint64(len(r.slots))].ev.ID()
			r.start++
		}
		s := &r.slots[r.next%uint64(len(r.slots))]
		s.ev = *e
		s.json.Store(nil)
		r.next++
		ns := e.Namespace
		if !r.nsSeen[ns] {
			if len(r.nsSeen) < MaxMetricNamespaces {
				r.nsSeen[ns] = true
			} else {
				ns = OtherNamespace
			}
		}
		r.counts[eventKind{e.Type, e.Name, ns}]++
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// reset drops everything: the state jumped to index (a snapshot restore),
// so no reader can know what it missed. A hole of one position makes every
// reader's next Read fail, including one that was up to date.
func (r *EventRing) reset(index uint64) {
	r.mu.Lock()
	r.next++
	r.start = r.next
	r.floor = EventID{Index: index, Seq: SeqAll}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Changed returns a channel closed at the next append or reset.
func (r *EventRing) Changed() <-chan struct{} {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.changed
}

// Tail is the position after the newest event, and the ID a reader that
// starts there has seen up to (the newest event's, or the floor).
func (r *EventRing) Tail() (pos uint64, last EventID) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.next, r.lastLocked()
}

func (r *EventRing) lastLocked() EventID {
	if r.next == r.start {
		return r.floor
	}
	return r.slots[(r.next-1)%uint64(len(r.slots))].ev.ID()
}

// Seek returns the position of the first event after id. ok is false when
// events after id may have left the ring (or never reached it): the
// reader must re-list and start at Tail.
func (r *EventRing) Seek(after EventID) (pos uint64, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if after.Less(r.floor) {
		return 0, false
	}
	// Binary search: the ring is in ID order.
	lo, hi := r.start, r.next
	for lo < hi {
		mid := lo + (hi-lo)/2
		if after.Less(r.slots[mid%uint64(len(r.slots))].ev.ID()) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

// Read copies events from pos on into dst (up to its capacity) and
// returns them with the position after the last. ok is false when pos has
// left the ring: the reader lost events and must re-list.
func (r *EventRing) Read(pos uint64, dst []RingEvent) (out []RingEvent, next uint64, ok bool) {
	out = dst[:0]
	r.mu.RLock()
	if pos < r.start {
		r.mu.RUnlock()
		return out, pos, false
	}
	for ; pos < r.next && len(out) < cap(dst); pos++ {
		s := &r.slots[pos%uint64(len(r.slots))]
		out = append(out, RingEvent{Event: s.ev})
		if m := s.json.Load(); m != nil && m.pos == pos {
			m.set(&out[len(out)-1])
		}
	}
	r.mu.RUnlock()
	// Encode outside the ring's lock (Apply appends under it), but one
	// reader at a time: readers woken together by one append would
	// otherwise all encode the same events.
	encoding := false
	for i := range out {
		if out[i].Frame != nil {
			continue
		}
		if !encoding {
			r.encMu.Lock()
			encoding = true
		}
		p := pos - uint64(len(out)-i)
		s := &r.slots[p%uint64(len(r.slots))]
		if m := s.json.Load(); m != nil && m.pos == p {
			m.set(&out[i]) // another reader encoded it meanwhile
			continue
		}
		m := encodeFrame(&out[i].Event, p)
		m.set(&out[i])
		s.json.Store(m) // a late one for an overwritten slot is never used
	}
	if encoding {
		r.encMu.Unlock()
	}
	return out, pos, true
}

// Visit calls fn for each event from pos on, under the ring's read lock
// (fn must be quick and must not keep e), without encoding them, and
// returns the position after the last. ok is false when pos has left the
// ring: the reader lost events.
func (r *EventRing) Visit(pos uint64, fn func(e *Event)) (next uint64, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if pos < r.start {
		return pos, false
	}
	for ; pos < r.next; pos++ {
		fn(&r.slots[pos%uint64(len(r.slots))].ev)
	}
	return pos, true
}

// Counts returns how many events of each kind ("attempt.lost") this node
// has applied since it started.
func (r *EventRing) Counts() map[string]uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]uint64, len(r.counts))
	for k, v := range r.counts {
		e := Event{Type: k.typ, Name: k.name}
		out[e.Kind()] += v
	}
	return out
}

// CountsByNamespace is Counts per namespace (display name: "default" for
// the default namespace; OtherNamespace for those beyond
// MaxMetricNamespaces).
func (r *EventRing) CountsByNamespace() map[string]map[string]uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[string]map[string]uint64{}
	for k, v := range r.counts {
		ns := k.ns
		if ns != OtherNamespace {
			ns = NamespaceOf(ns)
		}
		m := out[ns]
		if m == nil {
			m = map[string]uint64{}
			out[ns] = m
		}
		e := Event{Type: k.typ, Name: k.name}
		m[e.Kind()] += v
	}
	return out
}

// Events is this node's ring of recent events.
func (f *FSM) Events() *EventRing { return f.events }
