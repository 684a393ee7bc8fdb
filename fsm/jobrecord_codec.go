package fsm

import (
	"encoding/binary"
	"math"

	"github.com/fxamacker/cbor/v2"
	"github.com/x448/float16"
)

// A job record is read and written on every transition of the job, its
// spec kept encoded (jobrecord.go). The rest of the common record — a job
// with no dependencies, gang, array or array task — is encoded and decoded
// by hand instead of by reflection, the spec's bytes copied as they are:
// appendStoredJob writes exactly what encode(s) writes
// (TestStoredJobCodecMatchesEncode), and anything else goes through encode
// and decode.

// encodeStoredJob is encode(s) for a record whose Spec is one well-formed
// item (as decodeStoredJobRecord reads it).
func encodeStoredJob(s *storedJob) ([]byte, error) {
	return encodeByHand(s, storedJobSize(s), appendStoredJob)
}

// decodeStoredJobRecord is decode(b, s).
func decodeStoredJobRecord(b []byte, s *storedJob) error { return decodeByHand(b, s, readStoredJob) }

// The keys of the records appendStoredJob writes, in the codec's order:
// shorter first, then bytewise.
const (
	jkID              = "id"
	jkSpec            = "spec"
	jkState           = "state"
	jkReason          = "reason"
	jkAttempts        = "attempts"
	jkWorkflow        = "workflow"
	jkExitCode        = "exit_code"
	jkUpdatedAt       = "updated_at"
	jkFinishedAt      = "finished_at"
	jkNextRunAt       = "next_run_at"
	jkPreemptions     = "preemptions"
	jkCreateIndex     = "create_index"
	jkModifyIndex     = "modify_index"
	jkSubmittedAt     = "submitted_at"
	jkSubmittedBy     = "submitted_by"
	jkCurrentAttempt  = "current_attempt"
	jkIdempotencyKey  = "idempotency_key"
	jkCountedAttempts = "counted_attempts"
)

// storedJobSize is enough room for s's record: 185 bytes of keys, at most
// 9 bytes a head or an integer, and four times of at most 30 bytes.
func storedJobSize(s *storedJob) int {
	return 512 + len(s.ID) + len(s.Spec) + len(s.State) + len(s.Reason) + len(s.IdempotencyKey) +
		len(s.Workflow) + len(s.SubmittedBy)
}

// appendStoredJob appends the record of s to b, false for one it does
// not write: with dependencies, a gang, an array or an array task, or no
// spec bytes (encode writes those as null).
func appendStoredJob(b []byte, s *storedJob) ([]byte, bool) {
	if s.Deps != nil || s.Gang != nil || s.Array != nil || s.ArrayTask != nil || len(s.Spec) == 0 {
		return b, false
	}
	n := 9 // id, spec, state, attempts, updated_at, create_index, modify_index, submitted_at, counted_attempts
	for _, present := range [...]bool{s.Reason != "", s.Workflow != "", s.ExitCode != nil, !s.FinishedAt.IsZero(),
		!s.NextRunAt.IsZero(), s.Preemptions != 0, s.SubmittedBy != "", s.Current != 0, s.IdempotencyKey != ""} {
		if present {
			n++
		}
	}
	b = appendCBORHead(b, 5<<5, uint64(n))
	b = appendCBORText(appendCBORText(b, jkID), s.ID)
	b = append(appendCBORText(b, jkSpec), s.Spec...)
	b = appendCBORText(appendCBORText(b, jkState), string(s.State))
	if s.Reason != "" {
		b = appendCBORText(appendCBORText(b, jkReason), s.Reason)
	}
	b = appendCBORInt(appendCBORText(b, jkAttempts), int64(s.Attempts))
	if s.Workflow != "" {
		b = appendCBORText(appendCBORText(b, jkWorkflow), s.Workflow)
	}
	if s.ExitCode != nil {
		b = appendCBORInt(appendCBORText(b, jkExitCode), int64(*s.ExitCode))
	}
	b = appendCBORTime(appendCBORText(b, jkUpdatedAt), s.UpdatedAt)
	if !s.FinishedAt.IsZero() {
		b = appendCBORTime(appendCBORText(b, jkFinishedAt), s.FinishedAt)
	}
	if !s.NextRunAt.IsZero() {
		b = appendCBORTime(appendCBORText(b, jkNextRunAt), s.NextRunAt)
	}
	if s.Preemptions != 0 {
		b = appendCBORInt(appendCBORText(b, jkPreemptions), int64(s.Preemptions))
	}
	b = appendCBORHead(appendCBORText(b, jkCreateIndex), 0, s.CreateIndex)
	b = appendCBORHead(appendCBORText(b, jkModifyIndex), 0, s.ModifyIndex)
	b = appendCBORTime(appendCBORText(b, jkSubmittedAt), s.SubmittedAt)
	if s.SubmittedBy != "" {
		b = appendCBORText(appendCBORText(b, jkSubmittedBy), s.SubmittedBy)
	}
	if s.Current != 0 {
		b = appendCBORInt(appendCBORText(b, jkCurrentAttempt), int64(s.Current))
	}
	if s.IdempotencyKey != "" {
		b = appendCBORText(appendCBORText(b, jkIdempotencyKey), s.IdempotencyKey)
	}
	return appendCBORInt(appendCBORText(b, jkCountedAttempts), int64(s.CountedAttempts)), true
}

// readStoredJob reads exactly what appendStoredJob writes into s (a zero
// storedJob), its spec any map that cborSkip can pass over (decode reads
// it afterwards): false for anything else.
func readStoredJob(b []byte, s *storedJob) bool {
	major, n, b, ok := cborHeadShortest(b)
	if !ok || major != 5 || n > 18 {
		return false
	}
	r := fieldReader{b: b, n: int(n)}
	if !r.key(jkID) || !r.text(&s.ID) || !r.key(jkSpec) || !r.spec(&s.Spec) || !r.key(jkState) || !r.jobState(&s.State) {
		return false
	}
	if r.key(jkReason) && !r.nonEmptyText(&s.Reason) {
		return false
	}
	if !r.key(jkAttempts) || !r.goInt(&s.Attempts) {
		return false
	}
	if r.key(jkWorkflow) && !r.nonEmptyText(&s.Workflow) {
		return false
	}
	if r.key(jkExitCode) {
		var c int
		if !r.goInt(&c) {
			return false
		}
		s.ExitCode = &c
	}
	if !r.key(jkUpdatedAt) || !r.time(&s.UpdatedAt, true) {
		return false
	}
	if r.key(jkFinishedAt) && !r.time(&s.FinishedAt, false) {
		return false
	}
	if r.key(jkNextRunAt) && !r.time(&s.NextRunAt, false) {
		return false
	}
	if r.key(jkPreemptions) && (!r.goInt(&s.Preemptions) || s.Preemptions == 0) {
		return false
	}
	if !r.key(jkCreateIndex) || !r.uint(&s.CreateIndex) || !r.key(jkModifyIndex) || !r.uint(&s.ModifyIndex) ||
		!r.key(jkSubmittedAt) || !r.time(&s.SubmittedAt, true) {
		return false
	}
	if r.key(jkSubmittedBy) && !r.nonEmptyText(&s.SubmittedBy) {
		return false
	}
	if r.key(jkCurrentAttempt) && (!r.goInt(&s.Current) || s.Current == 0) {
		return false
	}
	if r.key(jkIdempotencyKey) && !r.nonEmptyText(&s.IdempotencyKey) {
		return false
	}
	if !r.key(jkCountedAttempts) || !r.goInt(&s.CountedAttempts) {
		return false
	}
	return r.n == 0 && len(r.b) == 0
}

// spec takes a map item as its bytes, copied.
func (r *fieldReader) spec(p *cbor.RawMessage) bool {
	if len(r.b) == 0 || r.b[0]>>5 != 5 {
		return false
	}
	// The decoder allows 64 levels, the record's map being the first;
	// a spec near the limit is left to it.
	rest, ok := cborSkip(r.b, 62)
	if !ok {
		return false
	}
	*p = append([]byte(nil), r.b[:len(r.b)-len(rest)]...)
	r.b = rest
	return true
}

// jobState reads a JobState, the known ones without allocating.
func (r *fieldReader) jobState(s *JobState) bool {
	t, ok := r.textBytes(3)
	if !ok {
		return false
	}
	switch string(t) {
	case string(JobWaiting):
		*s = JobWaiting
	case string(JobQueued):
		*s = JobQueued
	case string(JobRunning):
		*s = JobRunning
	case string(JobRetrying):
		*s = JobRetrying
	case string(JobSucceeded):
		*s = JobSucceeded
	case string(JobFailed):
		*s = JobFailed
	case string(JobCancelled):
		*s = JobCancelled
	case string(JobSkipped):
		*s = JobSkipped
	default:
		*s = JobState(t)
	}
	return true
}

// goInt reads an integer that fits an int.
func (r *fieldReader) goInt(v *int) bool {
	var n int64
	if !r.int(&n) || int64(int(n)) != n {
		return false
	}
	*v = int(n)
	return true
}

// decodeSchedSpec is decode(spec, ss). Every transition of a job reads its
// spec's scheduling fields (decodeStoredJob), on every server: by
// reflection that was 2–3% of each server's CPU with 5,000 clients.
func decodeSchedSpec(spec []byte, ss *schedSpec) error {
	return decodeByHand(spec, ss, readSchedSpec)
}

// readSchedSpec reads schedSpec's fields from a stored spec (a JobSpec the
// codec wrote) by walking its top-level keys: the plain ones it reads
// (with the constraints and the backoff the API fills in), the spec's
// other fields it passes over. False (decode instead) for a spec with any
// of the other structured scheduling fields (exit codes, deadline,
// dependencies, volumes, array, webhooks, gang, an explicit preemptible),
// or one the codec would not have written that way (keys out of order or
// repeated, longer heads, tags, indefinite lengths, nulls or zeros where
// it leaves a field out, an infinite or NaN float).
func readSchedSpec(b []byte, ss *schedSpec) bool {
	major, n, rest, ok := cborHeadShortest(b)
	if !ok || major != 5 || n > uint64(len(rest)) {
		return false
	}
	r := fieldReader{b: rest}
	var prev []byte
	for i := range n {
		k, after, ok := r.nextKey()
		if !ok || (i > 0 && !canonicalLess(prev, k)) {
			return false
		}
		prev, r.b = k, after
		switch string(k) {
		case "namespace":
			ok = r.nonEmptyText(&ss.Namespace)
		case "driver":
			ok = r.nonEmptyText(&ss.Driver)
		case "user":
			ok = r.nonEmptyText(&ss.User)
		case "queue":
			ok = r.nonEmptyText(&ss.Queue)
		case "on_gpu_error":
			ok = r.nonEmptyText(&ss.OnGPUError)
		case "priority":
			ok = r.goInt(&ss.Priority)
		case "max_attempts":
			ok = r.goInt(&ss.MaxAttempts) && ss.MaxAttempts != 0
		case "resources":
			ok = r.resources(&ss.Resources)
		case "constraints":
			ok = r.texts(&ss.Constraints)
		case "backoff":
			ok = r.backoff(&ss.Backoff)
		default:
			if !specSkipped[string(k)] {
				// A structured scheduling field, or a key the decoder may
				// match to a field (it also matches case-insensitively).
				return false
			}
			// The decoder allows 64 levels, the spec's map being the first.
			r.b, ok = cborSkip(r.b, 62)
		}
		if !ok {
			return false
		}
	}
	return len(r.b) == 0
}

// texts reads a non-empty array of text strings.
func (r *fieldReader) texts(p *[]string) bool {
	major, n, rest, ok := cborHeadShortest(r.b)
	if !ok || major != 4 || n == 0 || n > uint64(len(rest)) {
		return false
	}
	r.b = rest
	out := make([]string, n)
	for i := range out {
		if !r.text(&out[i]) {
			return false
		}
	}
	*p = out
	return true
}

// backoff reads a Backoff: max, jitter, initial, multiplier in the codec's
// order, each left out when zero.
func (r *fieldReader) backoff(b *Backoff) bool {
	major, n, rest, ok := cborHeadShortest(r.b)
	if !ok || major != 5 || n > 4 {
		return false
	}
	outer := r.n
	r.b, r.n = rest, int(n)
	var initial, max int64
	if r.key("max") && !r.nonZeroInt(&max) {
		return false
	}
	if r.key("jitter") && !r.nonZeroFloat(&b.Jitter) {
		return false
	}
	if r.key("initial") && !r.nonZeroInt(&initial) {
		return false
	}
	if r.key("multiplier") && !r.nonZeroFloat(&b.Multiplier) {
		return false
	}
	if r.n != 0 {
		return false
	}
	b.Initial, b.Max = Duration(initial), Duration(max)
	r.n = outer
	return true
}

// nonZeroFloat reads a finite, non-zero float of any width (the codec
// writes the shortest that keeps the value).
func (r *fieldReader) nonZeroFloat(v *float64) bool {
	if len(r.b) == 0 {
		return false
	}
	var f float64
	switch b := r.b; {
	case b[0] == 0xf9 && len(b) >= 3:
		f, r.b = float64(float16.Frombits(binary.BigEndian.Uint16(b[1:])).Float32()), b[3:] // as the decoder converts it
	case b[0] == 0xfa && len(b) >= 5:
		f, r.b = float64(math.Float32frombits(binary.BigEndian.Uint32(b[1:]))), b[5:]
	case b[0] == 0xfb && len(b) >= 9:
		f, r.b = math.Float64frombits(binary.BigEndian.Uint64(b[1:])), b[9:]
	default:
		return false
	}
	if f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return false
	}
	*v = f
	return true
}

// specSkipped are the spec's fields the scheduler does not read (schedSpec's
// skipped ones): readSchedSpec passes over them. TestSchedSpecKeysKnown
// keeps the list whole.
var specSkipped = map[string]bool{
	"name": true, "command": true, "env": true, "secret_env": true, "timeout": true, "labels": true,
	"image": true, "network": true, "kill_signal": true, "kill_timeout": true, "placement": true,
	"run_at": true, "allow_unplaceable": true, "schedule": true, "scheduled_at": true, "singleton": true,
	"http": true, "inputs": true,
}

// nextKey reads a map key: a text string with its shortest head.
func (r *fieldReader) nextKey() (key, rest []byte, ok bool) {
	m, n, rest, ok := cborHeadShortest(r.b)
	if !ok || m != 3 || n > uint64(len(rest)) {
		return nil, nil, false
	}
	return rest[:n], rest[n:], true
}
