package api

import "time"

// Event topics, for EventQuery.Topics. The job topic covers attempts and
// webhook deliveries.
const (
	TopicJob      = "job"
	TopicNode     = "node"
	TopicLeader   = "leader"
	TopicSchedule = "schedule"
	TopicWorkflow = "workflow"
	// TopicReset is the topic of a reset: the stream lost its place (the
	// reader fell behind, or a snapshot restore replaced the state).
	// Re-read what you cache; the stream carries on from ID.
	TopicReset = "reset"
)

// Event is one committed state change: a message of the event stream and
// an entry of a job's timeline. ID ("INDEX-SEQ") is the same on every
// node; resume a stream after it with EventQuery.After.
type Event struct {
	ID        string    `json:"id"`
	Index     uint64    `json:"index"` // the raft index of the entry
	Seq       int       `json:"seq"`   // the event's position in the entry
	Topic     string    `json:"topic"`
	Type      string    `json:"type"` // TOPIC.NAME: job.succeeded, attempt.placed, node.dead, reset
	JobID     string    `json:"job_id,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	Node      string    `json:"node,omitempty"`
	State     string    `json:"state,omitempty"` // the new state
	Reason    string    `json:"reason,omitempty"`
	Term      uint64    `json:"term,omitempty"`
	Workflow  string    `json:"workflow,omitempty"`
	Schedule  string    `json:"schedule,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	At        time.Time `json:"at,omitzero"` // the leader's stamp of the entry
}

// IsReset reports whether e is a reset (see TopicReset).
func (e Event) IsReset() bool { return e.Topic == TopicReset }

// JobTimeline is a job's events, oldest first.
type JobTimeline struct {
	JobID  string  `json:"job_id"`
	Events []Event `json:"events"`
}
