package checker

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// The outputs workload's files: every attempt writes them, their bytes
// derived from the job ID and the attempt number, so the checker
// recomputes what each object must hold.
const (
	OutputsArtifact = "data.bin" // $FOREMAN_ARTIFACTS/data.bin
)

// OutputsArtifactBytes is data.bin of an attempt: the line "JOB ATTEMPT"
// repeated (`yes "$FOREMAN_JOB_ID $FOREMAN_ATTEMPT" | head -c SIZE`).
func OutputsArtifactBytes(job string, attempt, size int) []byte {
	line := fmt.Sprintf("%s %d\n", job, attempt)
	return []byte(strings.Repeat(line, size/len(line)+1)[:size])
}

// OutputsStdout is an attempt's stdout: lines numbered from 1.
func OutputsStdout(job string, attempt, lines int) []byte {
	var b strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&b, "line %d of %s attempt %d\n", i, job, attempt)
	}
	return []byte(b.String())
}

// OutputsStderr is an attempt's stderr.
func OutputsStderr(job string, attempt int) []byte {
	return []byte(fmt.Sprintf("stderr of %s attempt %d\n", job, attempt))
}

// OutputsJob is one job of the outputs workload: what its attempts were
// asked to write and what the end of the test found.
type OutputsJob struct {
	ID       string
	Size     int // data.bin's size
	Lines    int // stdout lines
	Attempts []OutputsAttempt
}

// OutputsAttempt is one attempt as the final listing shows it, with the
// reads of each object it reports stored, by object name.
type OutputsAttempt struct {
	Num     int
	Node    string
	State   string
	Outputs *fsm.Outputs
	// Bucket: read straight from the bucket (minio-go) by the recorded
	// key. API: downloaded through foreman from a node other than Node.
	Bucket map[string]ObjectRead
	API    map[string]ObjectRead
}

// ObjectRead is one read of an object: its length and digest, or why it
// failed; Node and Source say who answered (X-Foreman-*-Source).
type ObjectRead struct {
	Size   int64
	Sum    [32]byte
	Err    string
	Node   string
	Source string
}

// ReadOf summarises bytes read.
func ReadOf(b []byte) ObjectRead { return ObjectRead{Size: int64(len(b)), Sum: sha256.Sum256(b)} }

// Outputs checks issue 25's guarantee at the end of a run, with the store
// and every node healthy: nothing is reported stored that is not in the
// store byte for byte, and nothing is silently lost. For every attempt
// whose finish said outputs pending: the state is stored or partial (an
// upload that never resolves is a violation); every stored object exists
// in the bucket under its key with the recorded size and the bytes the
// attempt wrote, and the API serves the same bytes from another node;
// partial names the files not stored and why; a succeeded attempt accounts
// for each of its three files (stored or named not stored). A succeeded
// attempt with no outputs record at all (its finish never said where its
// outputs are) is a violation too: every agent runs with the store.
func Outputs(jobs []OutputsJob) Result {
	r := Result{Name: "outputs", Valid: true, Stats: map[string]int{}}
	sorted := append([]OutputsJob(nil), jobs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for _, j := range sorted {
		for _, a := range j.Attempts {
			checkOutputsAttempt(&r, j, a)
		}
	}
	return r
}

func checkOutputsAttempt(r *Result, j OutputsJob, a OutputsAttempt) {
	at := fmt.Sprintf("job %s attempt %d (on %s, %s)", j.ID, a.Num, a.Node, a.State)
	o := a.Outputs
	if o == nil {
		if a.State == string(fsm.AttemptSucceeded) {
			r.errorf("%s: finished with no outputs record: nothing says where its outputs are", at)
		}
		return
	}
	r.Stats["attempts"]++
	r.Stats["outputs_"+o.State]++
	switch o.State {
	case fsm.OutputsStored:
		if len(o.NotStored) > 0 {
			r.errorf("%s: stored but names files not stored: %v", at, o.NotStored)
		}
	case fsm.OutputsPartial:
		if len(o.NotStored) == 0 || o.Error == "" {
			r.errorf("%s: partial without naming the files not stored and why (not_stored %v, error %q)", at, o.NotStored, o.Error)
		}
		r.Stats["not_stored_files"] += len(o.NotStored)
	default:
		r.errorf("%s: outputs %q at the end of the test: never resolved", at, o.State)
		return
	}
	expected := map[string][]byte{}
	if a.State == string(fsm.AttemptSucceeded) {
		expected[fsm.OutputArtifact(OutputsArtifact)] = OutputsArtifactBytes(j.ID, a.Num, j.Size)
		expected[fsm.OutputStdout] = OutputsStdout(j.ID, a.Num, j.Lines)
		expected[fsm.OutputStderr] = OutputsStderr(j.ID, a.Num)
	}
	notStored := map[string]bool{}
	for _, n := range o.NotStored {
		notStored[n] = true
	}
	names := map[string]bool{}
	for _, obj := range o.Objects {
		names[obj.Name] = true
		if notStored[obj.Name] {
			r.errorf("%s: %s is both stored and not stored", at, obj.Name)
		}
		r.Stats["objects"]++
		want, known := expected[obj.Name]
		if known && obj.Size != int64(len(want)) {
			r.errorf("%s: %s recorded with %d bytes, the attempt wrote %d", at, obj.Name, obj.Size, len(want))
		}
		for _, src := range []struct {
			what string
			read ObjectRead
			ok   bool
		}{{"in the bucket", a.Bucket[obj.Name], a.Bucket != nil}, {"through the API", a.API[obj.Name], a.API != nil}} {
			if !src.ok {
				continue
			}
			rd, read := src.read, src.read != (ObjectRead{})
			via := src.what
			if src.what == "through the API" {
				via = fmt.Sprintf("through the API of %s", rd.Node)
				if rd.Source != "" {
					r.Stats["api_from_"+rd.Source]++
				}
			} else {
				r.Stats["bucket_reads"]++
			}
			switch {
			case !read:
				r.errorf("%s: %s (key %s) reported stored but never read %s", at, obj.Name, obj.Key, src.what)
			case rd.Err != "":
				r.errorf("%s: %s (key %s) reported stored but not readable %s: %s", at, obj.Name, obj.Key, via, rd.Err)
			case rd.Size != obj.Size:
				r.errorf("%s: %s (key %s) is %d bytes %s, recorded %d", at, obj.Name, obj.Key, rd.Size, via, obj.Size)
			case known && rd.Sum != sha256.Sum256(want):
				r.errorf("%s: %s (key %s) %s holds other bytes than the attempt wrote", at, obj.Name, obj.Key, via)
			default:
				if src.what == "in the bucket" {
					r.Stats["bytes_verified"] += int(rd.Size)
				}
			}
		}
	}
	for n := range notStored {
		if _, ok := expected[n]; len(expected) > 0 && !ok {
			r.errorf("%s: names %s not stored, a file the attempt never wrote", at, n)
		}
	}
	for n := range expected {
		if !names[n] && !notStored[n] {
			r.errorf("%s: %s is neither stored nor named not stored: silently lost", at, n)
		}
	}
}
