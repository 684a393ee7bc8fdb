package fsm

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// Outputs in an object store (issue 25). With --object-store an agent
// uploads each finished attempt's artifacts and logs to an S3-compatible
// store, so they outlive the node. The finish report says an upload is
// pending (Outputs.State pending); when it is done the node sends a second
// report, with state ReportOutputs, that records where each object lives
// (stored), or which files could not be stored (partial). Until then the
// bytes are only on the node, and nothing claims otherwise.

// ReportOutputs is the State of a report about a finished attempt's
// outputs (not an attempt state): Apply sets the attempt's Outputs and
// nothing else. The token and node must be the attempt's; the attempt
// must have ended (its job may have moved on to another attempt).
const ReportOutputs AttemptState = "outputs"

// Where an attempt's outputs are.
const (
	OutputsPending = "pending" // on the node; the upload is in progress or retrying
	OutputsStored  = "stored"  // every file is in the store (Objects)
	OutputsPartial = "partial" // the upload gave up on NotStored; the rest is in Objects
)

// Events of an outputs report (type attempt).
const (
	NameOutputsStored    = "outputs_stored"     // every file is in the store
	NameOutputsNotStored = "outputs_not_stored" // the upload gave up on some (Reason names them)
)

// Bounds of an outputs record.
const (
	outputsMaxObjects = ArtifactsMaxFiles + 2 // every artifact, stdout and stderr
	outputsErrMax     = 512
)

// Outputs says where an attempt's artifacts and logs are kept besides its
// node. Store is the store's location (s3://bucket/prefix, never a
// credential).
type Outputs struct {
	Store string `json:"store"`
	State string `json:"state"`
	// Objects are the stored files: Name is "artifacts/<path>",
	// "logs/stdout" or "logs/stderr"; Key the object's key in the bucket.
	Objects   []StoredObject `json:"objects,omitempty"`
	NotStored []string       `json:"not_stored,omitempty"`
	Error     string         `json:"error,omitempty"`
	StoredAt  time.Time      `json:"stored_at,omitzero"`
}

// StoredObject is one file of an attempt in the object store.
type StoredObject struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

// Object returns the stored object named name, or nil.
func (o *Outputs) Object(name string) *StoredObject {
	if o == nil {
		return nil
	}
	for i := range o.Objects {
		if o.Objects[i].Name == name {
			return &o.Objects[i]
		}
	}
	return nil
}

// Names of an attempt's files in Outputs.Objects.
const (
	OutputStdout = "logs/stdout"
	OutputStderr = "logs/stderr"
	// OutputCheckpoint is the task's checkpoint directory as a tar (the
	// format of exec.WriteCheckpoint), as it was when the attempt ended.
	OutputCheckpoint = "checkpoint"
)

// OutputArtifact is the Outputs name of an artifact.
func OutputArtifact(path string) string { return "artifacts/" + path }

// validOutputs says why an executor's Outputs cannot be recorded.
func validOutputs(o *Outputs, final bool) error {
	switch {
	case o.Store == "" || !strings.HasPrefix(o.Store, "s3://") || len(o.Store) > 1024:
		return fmt.Errorf("%w: outputs.store: %q is not an s3:// location", ErrBadCommand, o.Store)
	case !final && o.State != OutputsPending:
		return fmt.Errorf("%w: outputs.state: a finish report's outputs are pending (got %q)", ErrBadCommand, o.State)
	case final && o.State != OutputsStored && o.State != OutputsPartial:
		return fmt.Errorf("%w: outputs.state: an outputs report is stored or partial (got %q)", ErrBadCommand, o.State)
	case len(o.Objects)+len(o.NotStored) > outputsMaxObjects:
		return fmt.Errorf("%w: outputs: %d files (max %d)", ErrBadCommand, len(o.Objects)+len(o.NotStored), outputsMaxObjects)
	}
	for _, ob := range o.Objects {
		if ob.Name == "" || ob.Key == "" || len(ob.Key) > 1024 || ob.Size < 0 {
			return fmt.Errorf("%w: outputs.objects: bad entry %q", ErrBadCommand, ob.Name)
		}
	}
	return nil
}

// reportOutputs applies a ReportOutputs report.
func (a *applier) reportOutputs(p *ReportAttempt) error {
	if p.Outputs == nil {
		return fmt.Errorf("%w: outputs: missing in an outputs report", ErrBadCommand)
	}
	if err := validOutputs(p.Outputs, true); err != nil {
		return err
	}
	at, err := a.getAttempt(p.JobID, p.Attempt)
	if err != nil {
		return err
	}
	switch {
	case at.State.Live():
		return fmt.Errorf("%w: job %s attempt %d is %s: outputs come after the finish", ErrConflict, p.JobID, p.Attempt, at.State)
	case at.FencingToken != p.FencingToken:
		return fmt.Errorf("%w: job %s attempt %d has token %d, report carried %d", ErrStaleToken, p.JobID, p.Attempt, at.FencingToken, p.FencingToken)
	case p.Node != "" && at.Node != p.Node:
		return fmt.Errorf("%w: job %s attempt %d ran on %s, report came from %s", ErrStaleToken, p.JobID, p.Attempt, at.Node, p.Node)
	}
	o := *p.Outputs
	o.Error = truncateString(o.Error, outputsErrMax)
	if o.StoredAt.IsZero() {
		o.StoredAt = a.at
	}
	at.Outputs = &o
	if err := a.saveAttempt(at, at.State); err != nil {
		return err
	}
	name := NameOutputsStored
	if o.State == OutputsPartial {
		name = NameOutputsNotStored
	}
	a.emit(Event{Type: EventAttempt, Name: name, JobID: at.JobID, Attempt: at.Num, Node: at.Node, State: string(at.State), Reason: outputsReason(&o), Namespace: a.namespaceOf(at.JobID)})
	return nil
}

// outputsReason says, for an event, what was not stored and why.
func outputsReason(o *Outputs) string {
	if o.State != OutputsPartial {
		return ""
	}
	s := fmt.Sprintf("%d files not stored in %s", len(o.NotStored), o.Store)
	if len(o.NotStored) > 0 {
		s += " (" + strings.Join(o.NotStored[:min(3, len(o.NotStored))], ", ")
		if len(o.NotStored) > 3 {
			s += ", …"
		}
		s += ")"
	}
	if o.Error != "" {
		s += ": " + o.Error
	}
	return truncateString(s, outputsErrMax)
}

// StoredOutputsBefore lists, per store location, the object keys of the
// attempts of the terminal jobs that finished before t: what the leader
// deletes from the store once a GC with that cutoff has dropped the jobs.
func (t *Tx) StoredOutputsBefore(before time.Time) (map[string][]string, error) {
	b := t.tx.Bucket(bucketJobsByFinish)
	if b == nil {
		return nil, nil
	}
	out := map[string][]string{}
	limit := sortableTime(before)
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) <= dueFixed {
			return nil, fmt.Errorf("%w: finish index key %q", ErrCorrupt, k)
		}
		if binary.BigEndian.Uint64(k) >= limit {
			break
		}
		ats, err := t.Attempts(string(k[dueFixed:]))
		if err != nil {
			return nil, err
		}
		for _, at := range ats {
			if at.Outputs == nil {
				continue
			}
			for _, o := range at.Outputs.Objects {
				out[at.Outputs.Store] = append(out[at.Outputs.Store], o.Key)
			}
		}
	}
	return out, nil
}
