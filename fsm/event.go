package fsm

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// EventType says what an Event is about.
type EventType string

const (
	EventJob     EventType = "job"     // a job changed state (or was created)
	EventAttempt EventType = "attempt" // an attempt was created or changed
	EventNode    EventType = "node"    // a node record changed
	EventLeader  EventType = "leader"  // a new leader took office (CmdLeader)
	// EventSchedule: a schedule was created, updated, paused, resumed,
	// deleted, fired (JobID is the job it created) or a tick skipped.
	EventSchedule EventType = "schedule"
	// EventWorkflow: a workflow finished ("workflow.finished"; State is
	// its final state, Reason its job counts).
	EventWorkflow EventType = "workflow"
	// EventReset means the whole state was replaced by a snapshot restore
	// (or, on the stream, that the reader missed events): subscribers must
	// re-read what they cache.
	EventReset EventType = "reset"
)

// Event names (Event.Name) beyond the job, attempt and node state names,
// which name the transition into that state ("job.succeeded",
// "attempt.lost", "node.dead", "node.draining").
const (
	NameSubmitted     = "submitted"      // job: created
	NamePlaced        = "placed"         // attempt: created on a node
	NameStarted       = "started"        // attempt: reported running
	NameStopRequested = "stop_requested" // attempt: the node is asked to kill it
	NameJoined        = "joined"         // node: first registration
	NameUpdated       = "updated"        // node: description changed, no state change
	NameChanged       = "changed"        // leader: a new term's leader
	NameFinished      = "finished"       // workflow: every job is terminal
)

// Topics group event types for the stream's ?topic= filter. Job covers
// its attempts.
const (
	TopicJob      = "job"
	TopicNode     = "node"
	TopicLeader   = "leader"
	TopicSchedule = "schedule"
	TopicWorkflow = "workflow"
)

// Topics lists every topic a stream filter accepts.
var Topics = []string{TopicJob, TopicNode, TopicLeader, TopicSchedule, TopicWorkflow}

// Event is one committed change, published after its batch commits. Every
// node derives the same events, in the same order, from the same entries:
// (Index, Seq) identifies an event cluster-wide.
type Event struct {
	Index uint64 // the raft entry it came from
	Seq   int    // its position among that entry's events
	Type  EventType
	Name  string // what happened; see the Name* constants
	JobID string
	// Attempt is the attempt's number (for job events, the job's latest).
	Attempt int
	Node    string
	// State is the job's or attempt's new state, or the node's gossip state.
	State string
	// Reason accompanies terminal states and stop requests; for a node,
	// its eligibility.
	Reason string
	Term   uint64 // leader events
	// Workflow, Schedule and Namespace name what the event's job belongs
	// to, for the stream's filters (set once those exist).
	Workflow  string
	Schedule  string
	Namespace string
	At        time.Time // the entry's stamped time

	// wait feeds the latency histograms (metrics.go): submit → placed for
	// a first placement, placed → started for a start. Not replicated.
	wait time.Duration
	// use is what an attempt that ended added to usage accounting
	// (usage.go), for the usage counters. Not replicated.
	use *Usage
}

// Topic is the stream topic of e.
func (e *Event) Topic() string {
	switch e.Type {
	case EventJob, EventAttempt, EventWebhook:
		return TopicJob
	}
	return string(e.Type)
}

// Kind is the event's public type, e.g. "attempt.started".
func (e *Event) Kind() string {
	if e.Name == "" {
		return string(e.Type)
	}
	return string(e.Type) + "." + e.Name
}

// ID is the event's position in the cluster-wide stream.
func (e *Event) ID() EventID { return EventID{Index: e.Index, Seq: e.Seq} }

// EventID orders events: by raft index, then by position in the entry.
// Seq == SeqAll stands for "after every event of Index" and prints as the
// bare index.
type EventID struct {
	Index uint64
	Seq   int
}

// SeqAll is the Seq of an EventID that covers a whole entry.
const SeqAll = math.MaxInt32

func (id EventID) String() string {
	return string(id.appendTo(make([]byte, 0, 24)))
}

// appendTo appends the ID as String writes it.
func (id EventID) appendTo(b []byte) []byte {
	b = strconv.AppendUint(b, id.Index, 10)
	if id.Seq == SeqAll {
		return b
	}
	b = append(b, '-')
	return strconv.AppendInt(b, int64(id.Seq), 10)
}

// Less orders IDs.
func (id EventID) Less(o EventID) bool {
	return id.Index < o.Index || id.Index == o.Index && id.Seq < o.Seq
}

// ParseEventID reads "INDEX-SEQ" or a bare "INDEX" (after every event of
// that entry).
func ParseEventID(s string) (EventID, error) {
	idx, seq, hasSeq := strings.Cut(s, "-")
	i, err := strconv.ParseUint(idx, 10, 64)
	if err != nil {
		return EventID{}, fmt.Errorf("event ID %q: want INDEX or INDEX-SEQ", s)
	}
	if !hasSeq {
		return EventID{Index: i, Seq: SeqAll}, nil
	}
	n, err := strconv.Atoi(seq)
	if err != nil || n < 0 || n >= SeqAll {
		return EventID{}, fmt.Errorf("event ID %q: want INDEX or INDEX-SEQ", s)
	}
	return EventID{Index: i, Seq: n}, nil
}

// eventJSON is the public shape of an event (the stream, the timeline).
type eventJSON struct {
	ID        string    `json:"id"`
	Index     uint64    `json:"index"`
	Seq       int       `json:"seq"`
	Topic     string    `json:"topic"`
	Type      string    `json:"type"`
	JobID     string    `json:"job_id,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	Node      string    `json:"node,omitempty"`
	State     string    `json:"state,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Term      uint64    `json:"term,omitempty"`
	Workflow  string    `json:"workflow,omitempty"`
	Schedule  string    `json:"schedule,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	At        time.Time `json:"at,omitzero"`
}

// MarshalJSON writes the public shape: {"id":"12-0","topic":"job",
// "type":"attempt.started",...}.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.appendJSON(make([]byte, 0, 256)), nil
}

// public is e in its public shape, for encoding/json.
func (e *Event) public() eventJSON {
	return eventJSON{
		ID: e.ID().String(), Index: e.Index, Seq: e.Seq, Topic: e.Topic(), Type: e.Kind(),
		JobID: e.JobID, Attempt: e.Attempt, Node: e.Node, State: e.State, Reason: e.Reason,
		Term: e.Term, Workflow: e.Workflow, Schedule: e.Schedule, Namespace: e.Namespace, At: e.At,
	}
}

// appendJSON appends exactly what encoding/json makes of e.public(),
// without reflection: every event is encoded once for the streams, and
// at a few thousand commits a second with subscribers open encoding/json
// was most of what the stream cost apart from the writes
// (TestEventJSONMatchesEncodingJSON holds the two together).
func (e *Event) appendJSON(b []byte) []byte {
	if y := e.At.Year(); y < 0 || y > 9999 {
		out, _ := json.Marshal(e.public()) // encoding/json's own error path
		return append(b, out...)
	}
	b = append(b, `{"id":"`...)
	b = e.ID().appendTo(b)
	b = append(b, `","index":`...)
	b = strconv.AppendUint(b, e.Index, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, int64(e.Seq), 10)
	b = appendJSONField(b, "topic", e.Topic(), false)
	b = append(b, `,"type":`...)
	if e.Name == "" {
		b = appendJSONString(b, string(e.Type))
	} else if jsonPlain(string(e.Type)) && jsonPlain(e.Name) {
		b = append(b, '"')
		b = append(b, e.Type...)
		b = append(b, '.')
		b = append(b, e.Name...)
		b = append(b, '"')
	} else {
		b = appendJSONString(b, e.Kind())
	}
	b = appendJSONField(b, "job_id", e.JobID, true)
	if e.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(e.Attempt), 10)
	}
	b = appendJSONField(b, "node", e.Node, true)
	b = appendJSONField(b, "state", e.State, true)
	b = appendJSONField(b, "reason", e.Reason, true)
	if e.Term != 0 {
		b = append(b, `,"term":`...)
		b = strconv.AppendUint(b, e.Term, 10)
	}
	b = appendJSONField(b, "workflow", e.Workflow, true)
	b = appendJSONField(b, "schedule", e.Schedule, true)
	b = appendJSONField(b, "namespace", e.Namespace, true)
	if !e.At.IsZero() {
		b = append(b, `,"at":"`...)
		b = e.At.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, '}')
}

// appendJSONField appends ,"name":"value" (nothing for an empty value when
// omitEmpty).
func appendJSONField(b []byte, name, value string, omitEmpty bool) []byte {
	if omitEmpty && value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, value)
}

// appendJSONString appends s quoted as encoding/json quotes it: plain
// printable ASCII as is, anything else (escapes, HTML characters, other
// runes, invalid UTF-8) through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	if !jsonPlain(s) {
		q, _ := json.Marshal(s)
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// jsonPlain: encoding/json quotes s as it is.
func jsonPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w eventJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	typ, name, _ := strings.Cut(w.Type, ".")
	*e = Event{
		Index: w.Index, Seq: w.Seq, Type: EventType(typ), Name: name,
		JobID: w.JobID, Attempt: w.Attempt, Node: w.Node, State: w.State, Reason: w.Reason,
		Term: w.Term, Workflow: w.Workflow, Schedule: w.Schedule, Namespace: w.Namespace, At: w.At,
	}
	return nil
}

// jobEventName names a job's transition from one state to the next.
func jobEventName(from, to JobState) string {
	if from == "" {
		return NameSubmitted
	}
	return string(to)
}

// attemptEventName names an attempt's transition.
func attemptEventName(from, to AttemptState) string {
	switch {
	case from == "":
		return NamePlaced
	case to == AttemptRunning:
		return NameStarted
	}
	return string(to)
}
