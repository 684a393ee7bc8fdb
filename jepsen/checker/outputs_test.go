package checker

import (
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// goodOutputs is job j1's attempt 1, stored, every object read back right
// from the bucket and from n2's API.
func goodOutputs() OutputsJob {
	j := OutputsJob{ID: "j1", Size: 5000, Lines: 3}
	files := map[string][]byte{
		"artifacts/data.bin": OutputsArtifactBytes("j1", 1, 5000),
		"logs/stdout":        OutputsStdout("j1", 1, 3),
		"logs/stderr":        OutputsStderr("j1", 1),
	}
	a := OutputsAttempt{Num: 1, Node: "n1", State: "succeeded", Outputs: &fsm.Outputs{Store: "s3://b/p", State: fsm.OutputsStored},
		Bucket: map[string]ObjectRead{}, API: map[string]ObjectRead{}}
	for _, name := range []string{"artifacts/data.bin", "logs/stdout", "logs/stderr"} {
		b := files[name]
		a.Outputs.Objects = append(a.Outputs.Objects, fsm.StoredObject{Name: name, Key: "p/default/j1/1/" + name, Size: int64(len(b))})
		a.Bucket[name] = ReadOf(b)
		api := ReadOf(b)
		api.Node, api.Source = "n2", "store"
		a.API[name] = api
	}
	j.Attempts = []OutputsAttempt{a}
	return j
}

func TestOutputs(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(j *OutputsJob)
		valid bool
		want  string // in the first error
	}{
		{"stored and read back", func(j *OutputsJob) {}, true, ""},
		{"reported stored but missing from the bucket", func(j *OutputsJob) {
			j.Attempts[0].Bucket["artifacts/data.bin"] = ObjectRead{Err: "The specified key does not exist."}
		}, false, "not readable in the bucket"},
		{"wrong bytes in the bucket", func(j *OutputsJob) {
			j.Attempts[0].Bucket["artifacts/data.bin"] = ReadOf(OutputsArtifactBytes("j1", 2, 5000))
		}, false, "other bytes than the attempt wrote"},
		{"wrong bytes through the API", func(j *OutputsJob) {
			rd := ReadOf(OutputsStdout("j1", 1, 2))
			rd.Size = int64(len(OutputsStdout("j1", 1, 3)))
			j.Attempts[0].API["logs/stdout"] = rd
		}, false, "through the API of"},
		{"truncated object", func(j *OutputsJob) {
			j.Attempts[0].Bucket["logs/stdout"] = ReadOf(OutputsStdout("j1", 1, 2))
		}, false, "bytes in the bucket, recorded"},
		{"recorded size is not what the attempt wrote", func(j *OutputsJob) {
			j.Attempts[0].Outputs.Objects[0].Size = 4096
		}, false, "recorded with 4096 bytes"},
		{"never read back", func(j *OutputsJob) {
			delete(j.Attempts[0].API, "logs/stderr")
		}, false, "never read through the API"},
		{"outputs never resolved", func(j *OutputsJob) {
			j.Attempts[0].Outputs = &fsm.Outputs{Store: "s3://b/p", State: fsm.OutputsPending}
		}, false, "never resolved"},
		{"finished with no outputs record", func(j *OutputsJob) {
			j.Attempts[0].Outputs = nil
		}, false, "no outputs record"},
		{"a file silently lost", func(j *OutputsJob) {
			j.Attempts[0].Outputs.Objects = j.Attempts[0].Outputs.Objects[1:]
		}, false, "silently lost"},
		{"partial naming the file and why", func(j *OutputsJob) {
			o := j.Attempts[0].Outputs
			o.State, o.Objects, o.NotStored, o.Error = fsm.OutputsPartial, o.Objects[1:], []string{"artifacts/data.bin"}, "PUT: connection refused"
		}, true, ""},
		{"partial naming a file the attempt never wrote", func(j *OutputsJob) {
			o := j.Attempts[0].Outputs
			o.State, o.NotStored, o.Error = fsm.OutputsPartial, []string{"artifacts/other.bin"}, "PUT: connection refused"
		}, false, "never wrote"},
		{"partial without a reason", func(j *OutputsJob) {
			o := j.Attempts[0].Outputs
			o.State, o.Objects, o.NotStored = fsm.OutputsPartial, o.Objects[1:], []string{"artifacts/data.bin"}
		}, false, "without naming"},
		{"stored yet naming a file not stored", func(j *OutputsJob) {
			j.Attempts[0].Outputs.NotStored = []string{"logs/stderr"}
		}, false, "stored but names files not stored"},
		{"a lost attempt has no outputs", func(j *OutputsJob) {
			j.Attempts[0].State, j.Attempts[0].Outputs = "lost", nil
		}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := goodOutputs()
			tc.edit(&j)
			r := Outputs([]OutputsJob{j})
			if r.Valid != tc.valid {
				t.Fatalf("valid = %v, want %v; errors %v", r.Valid, tc.valid, r.Errors)
			}
			if tc.want != "" && (len(r.Errors) == 0 || !strings.Contains(r.Errors[0], tc.want)) {
				t.Errorf("errors %v, want one with %q", r.Errors, tc.want)
			}
		})
	}
}

// The files' bytes are what the job's shell writes: yes | head -c for
// data.bin (the line repeated, cut at the size).
func TestOutputsArtifactBytes(t *testing.T) {
	b := OutputsArtifactBytes("J", 2, 9)
	if string(b) != "J 2\nJ 2\nJ" {
		t.Errorf("got %q", b)
	}
	if n := len(OutputsArtifactBytes("01JABC", 1, 3<<20)); n != 3<<20 {
		t.Errorf("size %d", n)
	}
}
