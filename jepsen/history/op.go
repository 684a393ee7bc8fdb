package history

import (
	"bufio"
	"encoding/json"
	"os"
	"sort"
	"sync"
	"time"
)

// Outcome of a completed operation. Info means indeterminate: a timeout, a
// reset, a 503 or lost leadership may still have committed, so it is never
// treated as a failure.
type Outcome string

const (
	OK   Outcome = "ok"
	Fail Outcome = "fail"
	Info Outcome = "info"
)

// Op kinds recorded by the workloads.
const (
	Submit = "submit"
	Read   = "read"
)

// Op is one client operation, from invocation to completion.
type Op struct {
	Process int     `json:"process"` // client worker
	Kind    string  `json:"kind"`
	Node    string  `json:"node,omitempty"` // node the request went to
	Key     string  `json:"key,omitempty"`  // idempotency key of a submit
	JobID   string  `json:"job_id,omitempty"`
	Call    int64   `json:"call"`   // ns since the recorder's base
	Return  int64   `json:"return"` // ns since the recorder's base
	Outcome Outcome `json:"outcome"`
	Err     string  `json:"err,omitempty"`

	// Reads: the observed job state and its modify index (0 when unknown);
	// NotFound when the job did not exist.
	State       string `json:"state,omitempty"`
	ModifyIndex uint64 `json:"modify_index,omitempty"`
	NotFound    bool   `json:"not_found,omitempty"`
	Duplicate   bool   `json:"duplicate,omitempty"`
}

// Event is a nemesis window (or a marker when Start == End).
type Event struct {
	Name  string `json:"name"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Info  string `json:"info,omitempty"`
}

// Recorder is a concurrency-safe history with one monotonic base.
type Recorder struct {
	base time.Time

	mu     sync.Mutex
	ops    []Op
	events []Event
}

// NewRecorder starts the clock of a history now.
func NewRecorder() *Recorder { return &Recorder{base: time.Now()} }

// Now is the monotonic time since the base, in ns.
func (r *Recorder) Now() int64 { return int64(time.Since(r.base)) }

// Base is the wall-clock instant of time 0, used to map host records in.
func (r *Recorder) Base() time.Time { return r.base }

// Add records a completed op.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// AddEvent records a nemesis window.
func (r *Recorder) AddEvent(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Ops returns a copy of the ops sorted by call time.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// Events returns a copy of the nemesis windows.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// WriteJSONL saves ops then events, one JSON object a line.
func (r *Recorder) WriteJSONL(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, op := range r.Ops() {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return err
		}
	}
	for _, e := range r.Events() {
		if err := enc.Encode(map[string]any{"event": e}); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
