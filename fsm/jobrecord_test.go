package fsm

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestViewsMirrorRecords: the view types Apply decodes records into have
// the record type's fields in order, with the same names and tags, each
// either of the record's type or skipped (storedJob: the raw spec). A
// field added to Job but not to storedJob would silently vanish from every
// record a report rewrites; one missing from a view would cost an unknown
// key per decode.
func TestViewsMirrorRecords(t *testing.T) {
	rawT := reflect.TypeOf(storedJob{}.Spec)
	skipT := reflect.TypeOf(skipped{})
	for _, tc := range []struct {
		record, view reflect.Type
		alt          reflect.Type // the type a field may have instead
	}{
		{reflect.TypeOf(Job{}), reflect.TypeOf(storedJob{}), rawT},
		{reflect.TypeOf(JobSpec{}), reflect.TypeOf(schedSpec{}), skipT},
		{reflect.TypeOf(Job{}), reflect.TypeOf(jobCurrentView{}), skipT},
		{reflect.TypeOf(Job{}), reflect.TypeOf(jobSpecView{}), skipT},
		{reflect.TypeOf(JobSpec{}), reflect.TypeOf(countSpec{}), skipT},
		{reflect.TypeOf(Job{}), reflect.TypeOf(jobCountView{}), skipT},
	} {
		rt, vt := tc.record, tc.view
		if rt.NumField() != vt.NumField() {
			t.Errorf("%s has %d fields, %s %d", rt, rt.NumField(), vt, vt.NumField())
			continue
		}
		for i := range rt.NumField() {
			rf, vf := rt.Field(i), vt.Field(i)
			// jobCountView's spec is countSpec, checked as a view above.
			specView := vf.Type == reflect.TypeOf(countSpec{}) && rf.Type == reflect.TypeOf(JobSpec{})
			if rf.Name != vf.Name || rf.Tag != vf.Tag || (vf.Type != rf.Type && vf.Type != tc.alt && !specView) {
				t.Errorf("%s field %d: %s %s %q, %s has %s %s %q", rt, i, rf.Name, rf.Type, rf.Tag, vt, vf.Name, vf.Type, vf.Tag)
			}
		}
	}
}

// TestStoredJobRoundTrip: reading a record through decodeStoredJob and
// writing it back with encodeJob gives the bytes that decoding and
// encoding the whole Job gives (the old path), for random jobs with every
// field set, with random fields left zero, and with nulls in the spec.
func TestStoredJobRoundTrip(t *testing.T) {
	f := &filler{t: t, rnd: rand.New(rand.NewPCG(5, 6))}
	rnd := rand.New(rand.NewPCG(7, 8))
	sawRaw, sawFull := 0, 0
	for i := range 400 {
		var j Job
		f.fill(reflect.ValueOf(&j).Elem(), "Job")
		sv := reflect.ValueOf(&j.Spec).Elem()
		for k := range sv.NumField() {
			if rnd.IntN(3) == 0 {
				sv.Field(k).Set(reflect.Zero(sv.Field(k).Type()))
			}
		}
		if i%10 == 0 {
			j.Spec.Command = nil // CBOR null
		}
		if i%7 == 0 {
			j.Spec.Command = []string{}
		}
		if i%13 == 0 {
			j.Spec.RunAt = new(time.Time) // a zero time: null
		}
		first, err := encode(&j)
		if err != nil {
			t.Fatal(err)
		}
		// The old path, from the stored bytes.
		var whole Job
		if err := decode(first, &whole); err != nil {
			t.Fatal(err)
		}
		var cv jobCurrentView
		var spv jobSpecView
		if err := decode(first, &cv); err != nil || cv.Current != whole.Current {
			t.Fatalf("job %d: current view %d (%v), want %d", i, cv.Current, err, whole.Current)
		}
		if err := decode(first, &spv); err != nil || !reflect.DeepEqual(spv.Spec, whole.Spec) {
			t.Fatalf("job %d: spec view differs (%v)", i, err)
		}
		got, raw, err := decodeStoredJob(first)
		if err != nil {
			t.Fatal(err)
		}
		if raw == nil {
			sawFull++
			if !reflect.DeepEqual(got.Spec, whole.Spec) {
				t.Fatalf("job %d: full spec decode differs", i)
			}
		} else {
			sawRaw++
		}
		// Every field but the spec is decoded as the whole decode does.
		a, b := *got, whole
		a.Spec, b.Spec = JobSpec{}, JobSpec{}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("job %d: fields differ:\n%+v\n%+v", i, a, b)
		}
		// The spec fields Apply reads are there.
		ws := whole.Spec
		gs := got.Spec
		if !reflect.DeepEqual([]any{gs.Resources, gs.Priority, gs.MaxAttempts, gs.Driver, gs.Queue, gs.Constraints, gs.Backoff, gs.NoRetryExitCodes, gs.Deadline},
			[]any{ws.Resources, ws.Priority, ws.MaxAttempts, ws.Driver, ws.Queue, ws.Constraints, ws.Backoff, ws.NoRetryExitCodes, ws.Deadline}) {
			t.Fatalf("job %d: sched fields differ:\n%+v\n%+v", i, gs, ws)
		}
		if PlacementGroup(&gs) != PlacementGroup(&ws) {
			t.Fatalf("job %d: placement group differs", i)
		}
		// A transition, then the write back.
		for _, x := range []*Job{got, &whole} {
			x.State, x.Reason, x.ModifyIndex, x.Current = JobSucceeded, "", 99, 0
			x.FinishedAt = t0
		}
		gotB, err := encodeJob(got, raw)
		if err != nil {
			t.Fatal(err)
		}
		wantB, err := encode(&whole)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotB, wantB) {
			t.Fatalf("job %d: rewritten record differs from the whole re-encode\n got %x\nwant %x", i, gotB, wantB)
		}
	}
	if sawRaw == 0 || sawFull == 0 {
		t.Fatalf("paths not both exercised: raw %d, full %d", sawRaw, sawFull)
	}
}

// TestPlacementGroupStable pins PlacementGroup's output (it is part of the
// queued_by_group keys, so of StateHash).
func TestPlacementGroupStable(t *testing.T) {
	s := JobSpec{Queue: "q", Driver: "process", Constraints: []string{"zone == a", "b"},
		Resources: Resources{CPU: 1500, MemoryMB: -3, Named: map[string]int64{"gpu": 2, "a": 10}}}
	// sha256("1:q7:process1:29:zone == a1:b4:15002:-31:a2:103:gpu1:2")[:16]
	want, _ := hex.DecodeString("8525add562fda1bea33ec6aa1ce18eed")
	if got := PlacementGroup(&s); got != string(want) {
		t.Errorf("PlacementGroup = %x, want %x", got, want)
	}
}

func TestAttemptKeyFormat(t *testing.T) {
	for _, n := range []int{0, 1, 9, 10, 12345678, 99999999, 100000000, 123456789012, -1, -12345678} {
		want := []byte(fmtAttemptKey("job", n))
		if got := attemptKey("job", n); !bytes.Equal(got, want) {
			t.Errorf("attemptKey(%d) = %q, want %q", n, got, want)
		}
		if got := liveKey("node", "job", n); !bytes.Equal(got, append([]byte("node\x00"), want...)) {
			t.Errorf("liveKey(%d) = %q", n, got)
		}
	}
}

func fmtAttemptKey(jobID string, n int) string { return fmt.Sprintf("%s/%08d", jobID, n) }

// TestEncodeIdemRecord: the hand-written encoder writes the codec's bytes.
func TestEncodeIdemRecord(t *testing.T) {
	times := []time.Time{t0, t0.Add(123456789), time.Date(2031, 7, 8, 9, 10, 11, 1, time.FixedZone("x", -3600)), time.Unix(1, 0)}
	for _, n := range []int{1, 5, 23, 24, 25, 255, 256, 65535, 65536, 70000} {
		id := string(bytes.Repeat([]byte{'a', 0xff}, n)[:n])
		for _, at := range times {
			want, err := encode(idemRecord{JobID: id, RecordedAt: at})
			if err != nil {
				t.Fatal(err)
			}
			if got := encodeIdemRecord(id, rfc3339Text(at)); !bytes.Equal(got, want) {
				t.Fatalf("id of %d bytes, %v:\n got %x\nwant %x", n, at, got[:min(len(got), 64)], want[:min(len(want), 64)])
			}
		}
	}
}

// BenchmarkJobTransitionCodec: the record work of one job transition, the
// old way (decode the whole job, encode it) and the stored way
// (decodeStoredJob, encodeJob), on a typical job record.
func BenchmarkJobTransitionCodec(b *testing.B) {
	rt := t0.Add(time.Hour)
	j := Job{ID: "01JQ0000000000000000000001", State: JobRunning, SubmittedAt: t0, UpdatedAt: t0, Attempts: 1, CountedAttempts: 1, Current: 1,
		CreateIndex: 10, ModifyIndex: 11, IdempotencyKey: "key-1",
		Spec: JobSpec{Name: "bench", Command: []string{"/bin/sh", "-c", "echo hello"}, Env: map[string]string{"A": "1", "PATH": "/usr/bin"},
			Resources: Resources{CPU: 500, MemoryMB: 256}, Priority: 50, Labels: map[string]string{"team": "x", "svc": "y"},
			Image: "docker.io/library/alpine:3", Timeout: Duration(time.Minute), Deadline: &rt}}
	v, err := encode(&j)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var x Job
			if err := decode(v, &x); err != nil {
				b.Fatal(err)
			}
			x.State = JobSucceeded
			if _, err := encode(&x); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stored", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x, raw, err := decodeStoredJob(v)
			if err != nil || raw == nil {
				b.Fatal(err, raw == nil)
			}
			x.State = JobSucceeded
			if _, err := encodeJob(x, raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("current-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var x jobCurrentView
			if err := decode(v, &x); err != nil {
				b.Fatal(err)
			}
		}
	})
}
