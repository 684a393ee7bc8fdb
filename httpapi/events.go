package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// EventSource is the node's ring of recent events (*fsm.FSM satisfies it);
// Deps.State offers it or GET /v1/events answers 503.
type EventSource interface {
	Events() *fsm.EventRing
}

// HeaderLastEventID is how an SSE client resumes (browsers send it on
// reconnect by themselves).
const HeaderLastEventID = "Last-Event-ID"

// eventFilter is what one stream reader asked for.
type eventFilter struct {
	topics    []string // empty: every topic
	job       string
	workflow  string
	schedule  string
	namespace string // stored form ("" = default), when nsSet
	nsSet     bool
	// may says whether the reader may see a namespace's events (nil: all);
	// cluster says whether it may see node and leader events.
	may     func(ns string) bool
	cluster bool
}

func (f *eventFilter) match(e *fsm.Event) bool {
	if len(f.topics) > 0 && !slices.Contains(f.topics, e.Topic()) {
		return false
	}
	return (f.job == "" || e.JobID == f.job) &&
		(f.workflow == "" || e.Workflow == f.workflow) &&
		(f.schedule == "" || e.Schedule == f.schedule) &&
		f.matchNamespace(e)
}

// all says whether the filter lets every event through.
func (f *eventFilter) all() bool {
	return len(f.topics) == 0 && f.job == "" && f.workflow == "" && f.schedule == "" && !f.nsSet && f.may == nil && f.cluster
}

// matchNamespace: job, workflow and schedule events carry their
// namespace; node and leader events belong to none and need operator.
func (f *eventFilter) matchNamespace(e *fsm.Event) bool {
	switch e.Topic() {
	case fsm.TopicNode, fsm.TopicLeader:
		return f.cluster && !f.nsSet
	}
	if f.nsSet && e.Namespace != f.namespace {
		return false
	}
	return f.may == nil || f.may(e.Namespace)
}

// parseEventQuery reads the filters and the resume point (nil: from now).
func parseEventQuery(r *http.Request) (*eventFilter, *fsm.EventID, error) {
	q := r.URL.Query()
	f := &eventFilter{job: q.Get("job"), workflow: q.Get("workflow"), schedule: q.Get("schedule"), cluster: true}
	if ns := q.Get("namespace"); ns != "" && ns != AllNamespaces {
		if err := CheckNamespace("namespace", ns); err != nil {
			return nil, nil, err
		}
		f.namespace, f.nsSet = fsm.StoredNamespace(ns), true
	}
	for _, v := range q["topic"] {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			if !slices.Contains(fsm.Topics, t) {
				return nil, nil, invalid("topic", "unknown topic %q (want %s)", t, strings.Join(fsm.Topics, ", "))
			}
			f.topics = append(f.topics, t)
		}
	}
	var from *fsm.EventID
	if v := r.Header.Get(HeaderLastEventID); v != "" {
		id, err := fsm.ParseEventID(v)
		if err != nil {
			return nil, nil, invalid(HeaderLastEventID, "%v", err)
		}
		from = &id
	} else if v := q.Get("index"); v != "" {
		i, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, nil, invalid("index", "%q is not a raft index", v)
		}
		from = &fsm.EventID{Index: i, Seq: fsm.SeqAll}
	}
	return f, from, nil
}

// subscribers counts open streams (GET /v1/metrics).
type subscribers struct {
	mu sync.Mutex
	n  int
}

func (c *subscribers) add(d int) {
	c.mu.Lock()
	c.n += d
	c.mu.Unlock()
}

func (c *subscribers) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// heartbeat is one timer shared by every stream: its channel closes every
// interval, and no goroutine runs while nobody waits on it.
type heartbeat struct {
	every time.Duration
	mu    sync.Mutex
	ch    chan struct{}
}

func (h *heartbeat) C() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch == nil {
		ch := make(chan struct{})
		h.ch = ch
		time.AfterFunc(h.every, func() {
			h.mu.Lock()
			h.ch = nil
			h.mu.Unlock()
			close(ch)
		})
	}
	return h.ch
}

// events serves GET /v1/events as Server-Sent Events. Every stream reads
// the node's event ring at its own position: a reader never slows Apply
// and costs no buffer of its own. A reader that falls further behind than
// the ring gets a reset event and goes on from the newest; a reader that
// stops reading is dropped when a write blocks for EventWriteTimeout.
//
// The cost that matters is per stream and per wake-up: streams are woken
// together by one goroutine per node, at most once per coalescing delay
// that grows with their number (events_wake.go), and each wake-up writes
// everything it read as one burst of the ring's shared, pre-encoded
// frames, in one write to the socket (events_stream.go).
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	src, ok := s.state.(EventSource)
	if !ok {
		s.writeError(w, r, fmt.Errorf("%w: this node keeps no event stream", ErrUnavailable))
		return
	}
	filter, from, err := parseEventQuery(r)
	if err == nil && filter.nsSet {
		err = s.allow(r, PermRead, filter.namespace)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.acl.Enabled() {
		// Without ?namespace=, every namespace the token may read.
		filter.may = func(ns string) bool { return s.allow(r, PermRead, ns) == nil }
		filter.cluster = s.allow(r, PermOperator, "") == nil
	}
	ring := src.Events()
	pos, last := ring.Tail()
	behind := false
	if from != nil {
		if p, ok := ring.Seek(*from); ok {
			pos = p
		} else {
			behind = true
		}
	}
	// A node behind the client's last ID (it resumes here after another
	// node) holds no events after it yet: Seek puts it at the tail, and the
	// events it then applies up to that ID were sent already. Skip them.
	skipTo := from
	s.subscribers.add(1)
	defer s.subscribers.add(-1)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	out := openStream(w, r, s.cfg.EventWriteTimeout, s.shutdown.ctx(r))
	defer out.close()

	burst := []byte(": foreman events from " + s.cluster.NodeName() + "\n\n")
	if behind {
		burst = appendReset(burst, last, "events after "+from.String()+" are no longer held by "+s.cluster.NodeName()+"; re-list and resume from this id")
	}
	if out.write(burst) != nil {
		return
	}
	all := filter.all()
	leave := s.waker.join(ring, all)
	defer leave()
	// wait waits for the next wake-up (false: the stream is over).
	wait := func(changed <-chan struct{}) bool {
		select {
		case <-out.gone():
			return false
		case <-changed:
		case <-s.beat.C():
			if out.write([]byte(": heartbeat\n\n")) != nil {
				return false
			}
		}
		return true
	}
	for {
		changed, shared := s.waker.C()
		limit := uint64(math.MaxUint64) // where this wake-up's own reads stop
		if all && skipTo == nil && shared != nil {
			if pos >= shared.from && pos <= shared.to {
				// What every unfiltered stream writes; the next burst
				// starts where this one ends, at the next wake-up. (Reading
				// on from the ring would put the stream past that start and
				// off the shared path.)
				if f := shared.framesFrom(pos); len(f) > 0 && out.write(f) != nil {
					return
				}
				pos = shared.to
				if !wait(changed) {
					return
				}
				continue
			}
			if pos < shared.from {
				limit = shared.from // catch up to the burst, then take it
			}
		}
		if all {
			s.waker.ownReads.Add(1)
		}
		// Everything this wake-up can read goes out in one burst. The
		// read and write buffers are pooled, not held while waiting: an
		// idle stream then costs its goroutines and connection only.
		buf := readBufs.Get().(*[]fsm.RingEvent)
		wb := burstBufs.Get().(*[]byte)
		b := (*wb)[:0]
		lost := false
		for len(b) < maxBurst && pos < limit {
			evs, next, ok := ring.Read(pos, (*buf)[:0:min(uint64(cap(*buf)), limit-pos)])
			if !ok {
				lost = true
				break
			}
			pos = next
			for i := range evs {
				if skipTo != nil {
					if !skipTo.Less(evs[i].Event.ID()) {
						continue
					}
					skipTo = nil
				}
				if filter.match(&evs[i].Event) {
					b = append(b, evs[i].Frame...)
				}
			}
			more := len(evs) == cap(evs)
			clear(evs) // drop the references before pooling
			if !more {
				break
			}
		}
		readBufs.Put(buf)
		if lost {
			// What was read before the hole goes first (it is in order
			// and complete), then the reset.
			pos, last = ring.Tail()
			skipTo = nil
			b = appendReset(b, last, "this stream fell behind the node's event buffer (or the node restored a snapshot); re-list and resume from this id")
		}
		err := error(nil)
		if len(b) > 0 {
			err = out.write(b)
		}
		full := len(b) >= maxBurst
		if cap(b) <= maxPooledBurst {
			*wb = b[:0]
			burstBufs.Put(wb)
		}
		if err != nil {
			return
		}
		if full || lost || pos == limit {
			continue // more to read now, or the shared burst to take
		}
		if !wait(changed) {
			return
		}
	}
}

// readBufs holds the streams' read buffers (256 events, ~80 KB each);
// burstBufs what one wake-up writes.
var (
	readBufs  = sync.Pool{New: func() any { b := make([]fsm.RingEvent, 0, 256); return &b }}
	burstBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}
)

// maxPooledBurst: a larger burst buffer (a reader catching up) is left
// to the collector rather than kept. maxBurst: a wake-up writes at most
// about this much before it reads on (a reader far behind catches up in
// writes of this size).
const (
	maxPooledBurst = 256 << 10
	maxBurst       = 1 << 20
)

// appendReset tells the reader it missed events; id is where to resume
// after re-listing.
func appendReset(b []byte, id fsm.EventID, reason string) []byte {
	data, _ := (fsm.Event{Index: id.Index, Seq: id.Seq, Type: fsm.EventReset, Reason: reason}).MarshalJSON()
	return fmt.Appendf(b, "id: %s\nevent: reset\ndata: %s\n\n", id, data)
}

// jobEvents serves GET /v1/jobs/{id}/events: the job's timeline.
func (s *server) jobEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var evs []fsm.Event
	err := s.state.View(func(tx *fsm.Tx) error {
		if _, err := tx.Job(id); err != nil {
			return err
		}
		var err error
		evs, err = tx.JobEvents(id)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if evs == nil {
		evs = []fsm.Event{}
	}
	writeJSON(w, http.StatusOK, JobTimeline{JobID: id, Events: evs})
}

// JobTimeline is the body of GET /v1/jobs/{id}/events.
type JobTimeline struct {
	JobID  string      `json:"job_id"`
	Events []fsm.Event `json:"events"`
}
