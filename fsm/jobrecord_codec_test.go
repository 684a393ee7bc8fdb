package fsm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// randomStoredJob is a job record with edgeValues and a spec the codec
// wrote (full, plain, or with a null); fallback also sets a field
// appendStoredJob leaves to encode, now and then.
func randomStoredJob(t testing.TB, rng *rand.Rand, f *filler, fallback bool) storedJob {
	e := edgeValues{rng}
	states := []JobState{JobWaiting, JobQueued, JobRunning, JobRetrying, JobSucceeded, JobFailed, JobCancelled, JobSkipped, "", "odd"}
	var spec JobSpec
	switch rng.IntN(4) {
	case 0:
		f.fill(reflect.ValueOf(&spec).Elem(), "JobSpec")
	case 1:
		spec = JobSpec{Command: []string{"sh", "-c", e.str()}, Namespace: e.str(), Resources: Resources{CPU: e.i64()}}
	case 2:
		spec = JobSpec{} // command: null
	default:
		spec = JobSpec{Command: []string{"true"}, Labels: map[string]string{"team": e.str()}}
	}
	raw, err := encode(&spec)
	if err != nil {
		t.Fatal(err)
	}
	s := storedJob{
		ID: e.str(), Spec: raw, State: states[rng.IntN(len(states))], Reason: e.str(), IdempotencyKey: e.str(),
		SubmittedAt: e.tm(), UpdatedAt: e.tm(), FinishedAt: e.tm(), NextRunAt: e.tm(),
		Attempts: int(e.i64()), CountedAttempts: int(e.i64()), Current: int(e.i64()), Workflow: e.str(),
		Preemptions: int(e.i64()), SubmittedBy: e.str(), CreateIndex: e.u64(), ModifyIndex: e.u64(),
	}
	if rng.IntN(2) == 0 {
		code := int(e.i64())
		s.ExitCode = &code
	}
	if fallback {
		switch rng.IntN(5) {
		case 0:
			s.Deps = &Deps{Parents: 1}
		case 1:
			s.Gang = &GangStatus{Size: 2}
		case 2:
			s.Array = &ArrayStatus{Size: 3}
		case 3:
			s.ArrayTask = &ArrayTask{Array: "a", Index: 1}
		case 4:
			s.Spec = nil
		}
	}
	return s
}

func storedJobHandFree(s *storedJob) bool {
	return s.Deps == nil && s.Gang == nil && s.Array == nil && s.ArrayTask == nil && len(s.Spec) > 0
}

// TestStoredJobCodecMatchesEncode: the hand-written job record codec
// writes exactly what the reflection codec writes, for every record it
// takes (every one without dependencies, gang, array or array task), and
// reads back what decode reads; a record read through decodeStoredJob
// is written back unchanged by encodeJob.
func TestStoredJobCodecMatchesEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	f := &filler{t: t, rnd: rand.New(rand.NewPCG(11, 12))}
	handled := 0
	for i := range 3000 {
		s := randomStoredJob(t, rng, f, i%5 == 4)
		want, ok := checkHandCodec(t, &s, storedJobHandFree(&s), storedJobCodec)
		if ok {
			handled++
		}
		checkStoredJobFastRead(t, want)
		var dec storedJob
		derr := decode(want, &dec)
		// Apply's path: read, write back unchanged.
		if derr == nil {
			j, raw, err := decodeStoredJob(want)
			if err != nil {
				t.Fatal(err)
			}
			if raw != nil {
				back, err := encodeJob(j, raw)
				if err != nil || !bytes.Equal(back, want) {
					t.Fatalf("encodeJob(decodeStoredJob(x)) != x: %v\n%x\n%x", err, back, want)
				}
			}
		}

		for range 4 {
			checkStoredJobFastRead(t, damaged(rng, want))
		}
	}
	if handled < 1500 {
		t.Fatalf("only %d records written by hand", handled)
	}
}

// storedJobCodec is the job record's hand codec, for checkHandCodec.
var storedJobCodec = handCodec[storedJob]{write: appendStoredJob, size: storedJobSize, encode: encodeStoredJob, read: readStoredJob}

// checkStoredJobFastRead: what readStoredJob takes, decode reads the
// same, and decodeStoredJobRecord agrees with decode either way.
func checkStoredJobFastRead(t *testing.T, b []byte) {
	t.Helper()
	checkFastRead(t, b, readStoredJob, decodeStoredJobRecord)
}

// TestDecodeStoredJobFallsBack: records readStoredJob does not take are
// read by decode: keys out of order, a spec that is not a map.
func TestDecodeStoredJobFallsBack(t *testing.T) {
	spec, _ := encode(&JobSpec{Command: []string{"true"}})
	base := storedJob{ID: "j", Spec: spec, State: JobQueued, UpdatedAt: time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)}
	good, ok := appendStoredJob(nil, &base)
	if !ok {
		t.Fatal("appendStoredJob refused a plain record")
	}
	var s storedJob
	if !readStoredJob(good, &s) || !reflect.DeepEqual(s, base) {
		t.Fatalf("readStoredJob: %+v", s)
	}
	notMap := bytes.Replace(good, spec, []byte{0x83, 0x01, 0x02, 0x03}, 1)
	extra := append(append([]byte{good[0] + 1}, good[1:]...), appendCBORText(nil, "zzzzzzzzzzzzzzzzz")...)
	extra = append(extra, 0x00)
	for name, b := range map[string][]byte{"spec not a map": notMap, "unknown key": extra} {
		if readStoredJob(b, &storedJob{}) {
			t.Errorf("%s: readStoredJob took %x", name, b)
		}
		checkStoredJobFastRead(t, b)
	}
	if err := decodeStoredJobRecord(good[:len(good)-1], &storedJob{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated: %v, want ErrCorrupt", err)
	}
}

// FuzzStoredJobCodec: on any bytes, readStoredJob never panics, and what
// it takes decode reads as the same record.
func FuzzStoredJobCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(13, 14))
	fl := &filler{t: &testing.T{}, rnd: rand.New(rand.NewPCG(15, 16))}
	for range 20 {
		s := randomStoredJob(f, rng, fl, false)
		b, _ := encode(&s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkStoredJobFastRead(t, b)
	})
}
