package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Webhooks (issue 12). A job's spec may carry Notify hooks. When Apply
// moves a job into a state a hook asks for, it writes a pending Delivery
// record in the same transaction, so what must still be delivered is in
// the replicated state: the leader's deliverer (sched/deliver.go) POSTs
// the due ones and commits each try's outcome (CmdDeliveries); a new
// leader carries on from the records. Delivery is therefore at least once:
// a try whose outcome was not committed before a failover is made again,
// with the same event ID for the receiver to deduplicate.

// Webhook is one notify entry of a job spec.
type Webhook struct {
	URL string `json:"url"`
	// Events are the job transitions to deliver: WebhookEvents names them.
	Events []string `json:"events"`
	// Secret signs each delivery (X-Foreman-Signature); never shown by the API.
	Secret string `json:"secret,omitempty"`
	// MaxAttempts bounds the tries of one delivery; 0 = DefaultDeliveryAttempts.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// WebhookEvents are the event names a Webhook may ask for: a job state,
// or "finished" for any terminal state.
var WebhookEvents = []string{
	string(JobRunning), string(JobRetrying), string(JobSucceeded), string(JobFailed),
	string(JobCancelled), string(JobSkipped), EventFinished,
}

// EventFinished matches every terminal job state.
const EventFinished = "finished"

// wants reports whether the hook asks for a transition into s.
func (w *Webhook) wants(s JobState) bool {
	for _, e := range w.Events {
		if e == string(s) || e == EventFinished && s.Terminal() {
			return true
		}
	}
	return false
}

// The retry policy of a delivery. The wait before try n+1 is
// DeliveryBackoffInitial·2^(n-1), at most DeliveryBackoffMax (1 s, 2 s,
// 4 s … 1 h); a delivery fails for good after its MaxAttempts tries or
// once DeliveryMaxAge has passed since its event, whichever comes first.
const (
	DeliveryBackoffInitial  = time.Second
	DeliveryBackoffMax      = time.Hour
	DeliveryMaxAge          = 24 * time.Hour
	DefaultDeliveryAttempts = 50
	MaxDeliveryAttempts     = 100
)

// DeliveryBackoff is the wait after the n-th failed try (n ≥ 1). Integer
// doubling: the same on every platform.
func DeliveryBackoff(n int) time.Duration {
	d := DeliveryBackoffInitial
	for i := 1; i < n && d < DeliveryBackoffMax; i++ {
		d *= 2
	}
	return min(d, DeliveryBackoffMax)
}

// DeliveryState is where a delivery is: pending until the receiver
// answered 2xx (delivered) or the tries ran out (failed).
type DeliveryState string

const (
	DeliveryPending   DeliveryState = "pending"
	DeliveryDelivered DeliveryState = "delivered"
	DeliveryFailed    DeliveryState = "failed"
)

// WebhookEvent is the JSON body of a delivery: the job event as the event
// stream shows it (same ID, type and fields) plus the exit code. ID is the
// idempotency key (X-Foreman-Event-ID): the same for every try of the
// delivery, and for every hook that receives the same transition.
type WebhookEvent struct {
	ID       string    `json:"id"`   // "<index>-<seq>"
	Type     string    `json:"type"` // "job." + the new state, e.g. "job.succeeded"
	JobID    string    `json:"job_id"`
	State    JobState  `json:"state"`
	Reason   string    `json:"reason,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`   // the job's latest attempt
	ExitCode *int      `json:"exit_code,omitempty"` // of the latest finished attempt
	Index    uint64    `json:"index"`               // the raft index of the transition
	Seq      int       `json:"seq"`                 // its position among the entry's events
	At       time.Time `json:"at"`                  // the leader's time of the transition
}

// eventID is the ID of the seq-th event (0-based) of the entry at index:
// "<index>-<seq>", the ID the event stream gives the same event.
func eventID(index uint64, seq int) string {
	return strconv.FormatUint(index, 10) + "-" + strconv.Itoa(seq)
}

// Delivery is the replicated record of one event for one hook.
type Delivery struct {
	ID          string        `json:"id"` // job ID/index/hook: DeliveryOutcome.ID
	Hook        int           `json:"hook"`
	URL         string        `json:"url"`
	Event       WebhookEvent  `json:"event"`
	State       DeliveryState `json:"state"`
	Attempts    int           `json:"attempts"`
	MaxAttempts int           `json:"max_attempts"`
	LastStatus  int           `json:"last_status,omitempty"`
	LastError   string        `json:"last_error,omitempty"`
	NextAt      time.Time     `json:"next_at,omitzero"` // pending: when the next try is due
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
}

// EventWebhook is the event of a delivery that ended: Name is its state
// ("webhook.delivered", "webhook.failed"), Reason says which event went
// where and how. It is a job event (topic job, the job's timeline).
const EventWebhook EventType = "webhook"

// CmdDeliveries records tries of webhook deliveries.
const CmdDeliveries CommandType = "deliveries" // DeliveryOutcomes

// DeliveryOutcomes is the leader deliverer's report of finished tries.
type DeliveryOutcomes struct {
	Outcomes []DeliveryOutcome `json:"outcomes"`
}

// DeliveryOutcome is one try. Attempt is the try's number (the record's
// Attempts + 1): an outcome for any other number, or for a delivery no
// longer pending, is stale (a deposed leader's) and skipped.
type DeliveryOutcome struct {
	ID        string `json:"id"`
	Attempt   int    `json:"attempt"`
	Delivered bool   `json:"delivered"`
	Status    int    `json:"status,omitempty"` // the receiver's HTTP status; 0 = no answer
	Error     string `json:"error,omitempty"`
}

// maxDeliveryError bounds LastError (the receiver chooses what we store).
const maxDeliveryError = 512

// Buckets, created by the first delivery (so a state without webhooks
// hashes as before they existed).
var (
	// bucketDeliveries: delivery ID (job ID + "/" + 20-digit index + "/" +
	// 3-digit hook) → Delivery.
	bucketDeliveries = []byte("deliveries")
	// bucketDeliveriesDue: 8-byte sortable NextAt + delivery ID → empty,
	// for pending deliveries only.
	bucketDeliveriesDue = []byte("deliveries_due")
)

func deliveryID(jobID string, index uint64, hook int) string {
	return fmt.Sprintf("%s/%020d/%03d", jobID, index, hook)
}

func deliveryDueKey(at time.Time, id string) []byte {
	k := make([]byte, 0, dueFixed+len(id))
	k = binary.BigEndian.AppendUint64(k, sortableTime(at))
	return append(k, id...)
}

// deliveryBuckets returns the two buckets, creating them on first use.
func (a *applier) deliveryBuckets() (recs, due *bolt.Bucket, err error) {
	if recs, err = a.tx.CreateBucketIfNotExists(bucketDeliveries); err != nil {
		return nil, nil, err
	}
	due, err = a.tx.CreateBucketIfNotExists(bucketDeliveriesDue)
	return recs, due, err
}

// queueDeliveries writes a pending delivery for every hook of j that asks
// for its new state. Called by saveJob on each state change, right after
// it emitted the job's event (the entry's seq-th).
func (a *applier) queueDeliveries(j *Job, seq int) error {
	var ev *WebhookEvent
	for i := range j.Spec.Notify {
		h := &j.Spec.Notify[i]
		if !h.wants(j.State) {
			continue
		}
		if ev == nil {
			ev = &WebhookEvent{
				ID: eventID(a.index, seq), Type: "job." + string(j.State), JobID: j.ID, State: j.State,
				Reason: j.Reason, Attempt: j.Attempts, ExitCode: j.ExitCode, Index: a.index, Seq: seq, At: a.at,
			}
		}
		recs, due, err := a.deliveryBuckets()
		if err != nil {
			return err
		}
		d := &Delivery{
			ID: deliveryID(j.ID, a.index, i), Hook: i, URL: h.URL, Event: *ev, State: DeliveryPending,
			MaxAttempts: h.MaxAttempts, NextAt: a.at, CreatedAt: a.at, UpdatedAt: a.at,
		}
		if d.MaxAttempts <= 0 || d.MaxAttempts > MaxDeliveryAttempts {
			d.MaxAttempts = DefaultDeliveryAttempts
		}
		if err := a.putRecord(recs, []byte(d.ID), d); err != nil {
			return err
		}
		if err := a.put(due, deliveryDueKey(d.NextAt, d.ID), nil); err != nil {
			return err
		}
	}
	return nil
}

// deliveries applies CmdDeliveries: each outcome on its own (a stale one
// is skipped and changes nothing).
func (a *applier) deliveries(p *DeliveryOutcomes, res *Result) error {
	recs, due := a.tx.Bucket(bucketDeliveries), a.tx.Bucket(bucketDeliveriesDue)
	for _, o := range p.Outcomes {
		var v []byte
		if recs != nil {
			v = recs.Get([]byte(o.ID))
		}
		if v == nil {
			skip(res, o.ID, "no such delivery")
			continue
		}
		var d Delivery
		if err := decode(v, &d); err != nil {
			return err
		}
		if d.State != DeliveryPending || o.Attempt != d.Attempts+1 {
			skip(res, o.ID, fmt.Sprintf("stale: delivery %s after %d tries", d.State, d.Attempts))
			continue
		}
		if err := a.del(due, deliveryDueKey(d.NextAt, d.ID)); err != nil {
			return err
		}
		d.Attempts, d.LastStatus, d.LastError, d.UpdatedAt = o.Attempt, o.Status, o.Error, a.at
		if len(d.LastError) > maxDeliveryError {
			d.LastError = d.LastError[:maxDeliveryError]
		}
		next := a.at.Add(DeliveryBackoff(d.Attempts))
		switch {
		case o.Delivered:
			d.State, d.NextAt, d.LastError = DeliveryDelivered, time.Time{}, ""
		case d.Attempts >= d.MaxAttempts || !next.Before(d.CreatedAt.Add(DeliveryMaxAge)):
			d.State, d.NextAt = DeliveryFailed, time.Time{}
		default:
			d.NextAt = next
			if err := a.put(due, deliveryDueKey(d.NextAt, d.ID), nil); err != nil {
				return err
			}
		}
		if err := a.putRecord(recs, []byte(d.ID), &d); err != nil {
			return err
		}
		if d.State != DeliveryPending {
			a.emit(Event{Type: EventWebhook, Name: string(d.State), JobID: d.Event.JobID, Reason: deliverySummary(&d), Namespace: a.namespaceOf(d.Event.JobID)})
		}
	}
	return nil
}

// deliverySummary is the timeline's line for an ended delivery.
func deliverySummary(d *Delivery) string {
	s := fmt.Sprintf("%s to %s after %d tries", d.Event.Type, d.URL, d.Attempts)
	if d.Attempts == 1 {
		s = fmt.Sprintf("%s to %s", d.Event.Type, d.URL)
	}
	switch {
	case d.LastError != "":
		return s + ": " + d.LastError
	case d.LastStatus != 0:
		return s + ": HTTP " + strconv.Itoa(d.LastStatus)
	}
	return s
}

// deleteDeliveries drops a job's deliveries with the job (GC).
func (a *applier) deleteDeliveries(jobID string) error {
	recs, due := a.tx.Bucket(bucketDeliveries), a.tx.Bucket(bucketDeliveriesDue)
	if recs == nil {
		return nil
	}
	doomed, err := decodeUnder[Delivery](recs, attemptPrefix(jobID))
	if err != nil {
		return err
	}
	for _, d := range doomed {
		if d.State == DeliveryPending {
			if err := a.del(due, deliveryDueKey(d.NextAt, d.ID)); err != nil {
				return err
			}
		}
		if err := a.del(recs, []byte(d.ID)); err != nil {
			return err
		}
	}
	return nil
}

// Deliveries returns a job's deliveries, oldest event first.
func (t *Tx) Deliveries(jobID string) ([]Delivery, error) {
	return decodeUnder[Delivery](t.tx.Bucket(bucketDeliveries), attemptPrefix(jobID))
}

// DueDeliveries returns up to limit pending deliveries due at now (NextAt
// ≤ now), earliest first, skipping those whose ID skip reports, and the
// due time of the next pending one after them (zero: none).
func (t *Tx) DueDeliveries(now time.Time, limit int, skip func(id string) bool) (due []Delivery, next time.Time, err error) {
	idx, recs := t.tx.Bucket(bucketDeliveriesDue), t.tx.Bucket(bucketDeliveries)
	if idx == nil || recs == nil {
		return nil, time.Time{}, nil
	}
	c := idx.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) <= dueFixed {
			return nil, time.Time{}, fmt.Errorf("%w: delivery index key %q", ErrCorrupt, k)
		}
		id := string(k[dueFixed:])
		if skip != nil && skip(id) {
			continue
		}
		at := timeFromKey(k)
		if at.After(now) || len(due) >= limit {
			return due, at, nil
		}
		v := recs.Get([]byte(id))
		if v == nil {
			return nil, time.Time{}, fmt.Errorf("%w: delivery index names missing %q", ErrCorrupt, id)
		}
		var d Delivery
		if err := decode(v, &d); err != nil {
			return nil, time.Time{}, err
		}
		due = append(due, d)
	}
	return due, time.Time{}, nil
}

// ValidWebhookEvent reports whether name may appear in Webhook.Events.
func ValidWebhookEvent(name string) bool { return slices.Contains(WebhookEvents, name) }
