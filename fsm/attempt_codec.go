package fsm

import (
	"time"
)

// An attempt record is read and written on every transition of its job
// (placed, running, finished, lost), so the common record — a process or
// container attempt with no GPUs, artifacts, outputs or gang task — is
// encoded and decoded by hand instead of by reflection. appendAttempt
// writes exactly what encode(a) writes (TestAttemptCodecMatchesEncode),
// so the state and its hash do not depend on which wrote it; anything
// else goes through encode and decode.

// encodeAttempt is encode(a).
func encodeAttempt(a *Attempt) ([]byte, error) {
	return encodeByHand(a, attemptRecordSize(a), appendAttempt)
}

// decodeAttempt is decode(b, a).
func decodeAttempt(b []byte, a *Attempt) error { return decodeByHand(b, a, readAttempt) }

// decodedAttempt is decodeAttempt into a new Attempt.
func decodedAttempt(b []byte) (*Attempt, error) {
	var out Attempt
	if err := decodeAttempt(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// The keys of the records appendAttempt writes, in the codec's order:
// shorter first, then bytewise. Resources' keys follow.
const (
	akOOM             = "oom"
	akNode            = "node"
	akState           = "state"
	akJobID           = "job_id"
	akReason          = "reason"
	akResult          = "result"
	akSignal          = "signal"
	akAttempt         = "attempt"
	akCounted         = "counted"
	akWarning         = "warning"
	akExitCode        = "exit_code"
	akResources       = "resources"
	akStartedAt       = "started_at"
	akAssignedAt      = "assigned_at"
	akCPUTimeNs       = "cpu_time_ns"
	akFinishedAt      = "finished_at"
	akStderrTail      = "stderr_tail"
	akModifyIndex     = "modify_index"
	akFencingToken    = "fencing_token"
	akCancelRequested = "cancel_requested"
	akPeakMemoryBytes = "peak_memory_bytes"

	rkCPU       = "cpu"
	rkMemory    = "memory"
	rkGPUMemory = "gpu_memory"
)

// attemptRecordSize is enough room for a's record: 208 bytes of keys,
// at most 9 bytes a head or an integer, and three times of at most 30
// bytes (years 0 to 9999).
func attemptRecordSize(a *Attempt) int {
	return 512 + len(a.JobID) + len(a.Node) + len(a.State) + len(a.Reason) + len(a.CancelRequested) +
		len(a.Signal) + len(a.StderrTail) + len(a.Result) + len(a.Warning)
}

// appendAttempt appends the record of a to b, false (b unchanged in
// meaning) for an attempt it does not write: one with artifacts,
// outputs, a gang task, GPUs, a GPU share or named resources.
func appendAttempt(b []byte, a *Attempt) ([]byte, bool) {
	if len(a.Artifacts) > 0 || a.Outputs != nil || a.Task != nil || len(a.GPUs) > 0 || a.GPUShare != nil ||
		len(a.Resources.Named) > 0 {
		return b, false
	}
	n := 9 // node, state, job_id, attempt, counted, resources, assigned_at, modify_index, fencing_token
	for _, present := range [...]bool{a.OOM, a.Reason != "", len(a.Result) > 0, a.Signal != "", a.Warning != "",
		a.ExitCode != nil, !a.StartedAt.IsZero(), a.CPUTimeNs != 0, !a.FinishedAt.IsZero(), a.StderrTail != "",
		a.CancelRequested != "", a.PeakMemoryB != 0} {
		if present {
			n++
		}
	}
	b = appendCBORHead(b, 5<<5, uint64(n))
	if a.OOM {
		b = append(appendCBORText(b, akOOM), cborTrue)
	}
	b = appendCBORText(appendCBORText(b, akNode), a.Node)
	b = appendCBORText(appendCBORText(b, akState), string(a.State))
	b = appendCBORText(appendCBORText(b, akJobID), a.JobID)
	if a.Reason != "" {
		b = appendCBORText(appendCBORText(b, akReason), a.Reason)
	}
	if len(a.Result) > 0 {
		b = appendCBORHead(appendCBORText(b, akResult), 2<<5, uint64(len(a.Result)))
		b = append(b, a.Result...)
	}
	if a.Signal != "" {
		b = appendCBORText(appendCBORText(b, akSignal), a.Signal)
	}
	b = appendCBORInt(appendCBORText(b, akAttempt), int64(a.Num))
	b = appendCBORBool(appendCBORText(b, akCounted), a.Counted)
	if a.Warning != "" {
		b = appendCBORText(appendCBORText(b, akWarning), a.Warning)
	}
	if a.ExitCode != nil {
		b = appendCBORInt(appendCBORText(b, akExitCode), int64(*a.ExitCode))
	}
	b = appendResources(appendCBORText(b, akResources), &a.Resources)
	if !a.StartedAt.IsZero() {
		b = appendCBORTime(appendCBORText(b, akStartedAt), a.StartedAt)
	}
	b = appendCBORTime(appendCBORText(b, akAssignedAt), a.AssignedAt)
	if a.CPUTimeNs != 0 {
		b = appendCBORInt(appendCBORText(b, akCPUTimeNs), a.CPUTimeNs)
	}
	if !a.FinishedAt.IsZero() {
		b = appendCBORTime(appendCBORText(b, akFinishedAt), a.FinishedAt)
	}
	if a.StderrTail != "" {
		b = appendCBORText(appendCBORText(b, akStderrTail), a.StderrTail)
	}
	b = appendCBORHead(appendCBORText(b, akModifyIndex), 0, a.ModifyIndex)
	b = appendCBORHead(appendCBORText(b, akFencingToken), 0, a.FencingToken)
	if a.CancelRequested != "" {
		b = appendCBORText(appendCBORText(b, akCancelRequested), a.CancelRequested)
	}
	if a.PeakMemoryB != 0 {
		b = appendCBORInt(appendCBORText(b, akPeakMemoryBytes), a.PeakMemoryB)
	}
	return b, true
}

// appendResources appends r, whose Named is empty (omitempty on every
// field: cpu, memory, gpu_memory in the codec's order).
func appendResources(b []byte, r *Resources) []byte {
	n := 0
	for _, v := range [...]int64{r.CPU, r.MemoryMB, r.GPUMemoryMiB} {
		if v != 0 {
			n++
		}
	}
	b = appendCBORHead(b, 5<<5, uint64(n))
	if r.CPU != 0 {
		b = appendCBORInt(appendCBORText(b, rkCPU), r.CPU)
	}
	if r.MemoryMB != 0 {
		b = appendCBORInt(appendCBORText(b, rkMemory), r.MemoryMB)
	}
	if r.GPUMemoryMiB != 0 {
		b = appendCBORInt(appendCBORText(b, rkGPUMemory), r.GPUMemoryMiB)
	}
	return b
}

// readAttempt reads exactly what appendAttempt writes into a (a zero
// Attempt): false for anything else, a may then hold part of it.
func readAttempt(b []byte, a *Attempt) bool {
	major, n, b, ok := cborHeadShortest(b)
	if !ok || major != 5 || n > 21 {
		return false
	}
	r := fieldReader{b: b, n: int(n)}
	if r.key(akOOM) {
		if !r.boolean(&a.OOM) || !a.OOM {
			return false
		}
	}
	if !r.key(akNode) || !r.text(&a.Node) || !r.key(akState) || !r.state(&a.State) ||
		!r.key(akJobID) || !r.text(&a.JobID) {
		return false
	}
	if r.key(akReason) && !r.nonEmptyText(&a.Reason) {
		return false
	}
	if r.key(akResult) && !r.result(&a.Result) {
		return false
	}
	if r.key(akSignal) && !r.nonEmptyText(&a.Signal) {
		return false
	}
	if !r.key(akAttempt) || !r.goInt(&a.Num) || !r.key(akCounted) || !r.boolean(&a.Counted) {
		return false
	}
	if r.key(akWarning) && !r.nonEmptyText(&a.Warning) {
		return false
	}
	if r.key(akExitCode) {
		var code int
		if !r.goInt(&code) {
			return false
		}
		a.ExitCode = &code
	}
	if !r.key(akResources) || !r.resources(&a.Resources) {
		return false
	}
	if r.key(akStartedAt) && !r.time(&a.StartedAt, false) {
		return false
	}
	if !r.key(akAssignedAt) || !r.time(&a.AssignedAt, true) {
		return false
	}
	if r.key(akCPUTimeNs) && !r.nonZeroInt(&a.CPUTimeNs) {
		return false
	}
	if r.key(akFinishedAt) && !r.time(&a.FinishedAt, false) {
		return false
	}
	if r.key(akStderrTail) && !r.nonEmptyText(&a.StderrTail) {
		return false
	}
	if !r.key(akModifyIndex) || !r.uint(&a.ModifyIndex) || !r.key(akFencingToken) || !r.uint(&a.FencingToken) {
		return false
	}
	if r.key(akCancelRequested) && !r.nonEmptyText(&a.CancelRequested) {
		return false
	}
	if r.key(akPeakMemoryBytes) && !r.nonZeroInt(&a.PeakMemoryB) {
		return false
	}
	return r.n == 0 && len(r.b) == 0
}

// fieldReader reads a map's entries written in a known key order, each
// in its shortest form: key takes the next key if it is the one asked
// for (never past the map's count), and the value readers take its
// value. A reader that returns false leaves the reader in no useful
// state: the caller gives up.
type fieldReader struct {
	b []byte
	n int // entries left
}

// key reports whether the next key is k, and if so takes it.
func (r *fieldReader) key(k string) bool {
	if r.n == 0 || len(r.b) < 1+len(k) || r.b[0] != 0x60|byte(len(k)) || string(r.b[1:1+len(k)]) != k {
		return false
	}
	r.b, r.n = r.b[1+len(k):], r.n-1
	return true
}

func (r *fieldReader) textBytes(major byte) ([]byte, bool) {
	m, n, rest, ok := cborHeadShortest(r.b)
	if !ok || m != major || n > uint64(len(rest)) {
		return nil, false
	}
	r.b = rest[n:]
	return rest[:n], true
}

func (r *fieldReader) text(s *string) bool {
	t, ok := r.textBytes(3)
	if ok {
		*s = string(t)
	}
	return ok
}

func (r *fieldReader) nonEmptyText(s *string) bool {
	return r.text(s) && *s != ""
}

// state reads an AttemptState, the known ones without allocating.
func (r *fieldReader) state(s *AttemptState) bool {
	t, ok := r.textBytes(3)
	if !ok {
		return false
	}
	switch string(t) {
	case string(AttemptAssigned):
		*s = AttemptAssigned
	case string(AttemptRunning):
		*s = AttemptRunning
	case string(AttemptSucceeded):
		*s = AttemptSucceeded
	case string(AttemptFailed):
		*s = AttemptFailed
	case string(AttemptLost):
		*s = AttemptLost
	case string(AttemptKilled):
		*s = AttemptKilled
	default:
		*s = AttemptState(t)
	}
	return true
}

func (r *fieldReader) result(p *[]byte) bool {
	t, ok := r.textBytes(2)
	if !ok || len(t) == 0 {
		return false
	}
	*p = append([]byte(nil), t...)
	return true
}

func (r *fieldReader) boolean(v *bool) bool {
	if len(r.b) == 0 || (r.b[0] != cborTrue && r.b[0] != cborFalse) {
		return false
	}
	*v, r.b = r.b[0] == cborTrue, r.b[1:]
	return true
}

func (r *fieldReader) int(v *int64) bool {
	n, rest, ok := readCBORInt(r.b)
	if !ok {
		return false
	}
	*v, r.b = n, rest
	return true
}

func (r *fieldReader) nonZeroInt(v *int64) bool {
	return r.int(v) && *v != 0
}

func (r *fieldReader) uint(v *uint64) bool {
	m, n, rest, ok := cborHeadShortest(r.b)
	if !ok || m != 0 {
		return false
	}
	*v, r.b = n, rest
	return true
}

// time reads a time as the codec writes it: an RFC 3339 text string,
// parsed as decode parses it, or (orNull) null for the zero time.
func (r *fieldReader) time(t *time.Time, orNull bool) bool {
	if orNull && len(r.b) > 0 && r.b[0] == cborNull {
		r.b = r.b[1:]
		return true
	}
	s, ok := r.textBytes(3)
	if !ok {
		return false
	}
	v, err := time.Parse(time.RFC3339, string(s))
	if err != nil || v.IsZero() {
		return false
	}
	*t = v
	return true
}

// resources reads what appendResources writes.
func (r *fieldReader) resources(res *Resources) bool {
	major, n, rest, ok := cborHeadShortest(r.b)
	if !ok || major != 5 || n > 3 {
		return false
	}
	outer := r.n
	r.b, r.n = rest, int(n)
	if r.key(rkCPU) && !r.nonZeroInt(&res.CPU) {
		return false
	}
	if r.key(rkMemory) && !r.nonZeroInt(&res.MemoryMB) {
		return false
	}
	if r.key(rkGPUMemory) && !r.nonZeroInt(&res.GPUMemoryMiB) {
		return false
	}
	if r.n != 0 {
		return false
	}
	r.n = outer
	return true
}
