package fsm

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
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

// edgeFloats are floats the codec writes in 16, 32 or 64 bits (subnormal,
// largest, negative), and zero and infinities, which readSchedSpec leaves
// to decode (NaN too: TestSchedSpecReaderLeavesNaN; it is not here as it
// never equals itself).
var edgeFloats = []float64{0, 0.2, 2, 1.5, -2.5, 65504, 5.960464477539063e-08, 6.103515625e-05, 0.1, 1e-10,
	3.4028234663852886e+38, 1e300, -0.0009765625, math.Inf(1), math.Inf(-1)}

// checkSchedSpecRead is checkFastRead for readSchedSpec; a spec whose
// backoff decodes to a NaN (never equal to itself) must be left to decode.
func checkSchedSpecRead(t *testing.T, b []byte) {
	t.Helper()
	var dec schedSpec
	if decode(b, &dec) == nil && (math.IsNaN(dec.Backoff.Jitter) || math.IsNaN(dec.Backoff.Multiplier)) {
		var ss schedSpec
		if readSchedSpec(b, &ss) {
			t.Fatalf("%x: a NaN taken by hand", b)
		}
		return
	}
	checkFastRead(t, b, readSchedSpec, decodeSchedSpec)
}

// TestSchedSpecReaderLeavesNaN: a NaN in a backoff (16, 32 or 64 bits) is
// left to decode.
func TestSchedSpecReaderLeavesNaN(t *testing.T) {
	for _, nan := range [][]byte{{0xf9, 0x7e, 0x00}, {0xfa, 0x7f, 0xc0, 0, 0}, {0xfb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0}} {
		spec := append([]byte{0xa1, 0x67, 'b', 'a', 'c', 'k', 'o', 'f', 'f', 0xa1, 0x66, 'j', 'i', 't', 't', 'e', 'r'}, nan...)
		var ss schedSpec
		if readSchedSpec(spec, &ss) {
			t.Fatalf("%x: taken by hand (jitter %v)", spec, ss.Backoff.Jitter)
		}
		if err := decode(spec, &ss); err != nil || !math.IsNaN(ss.Backoff.Jitter) {
			t.Fatalf("%x: decode: %v, jitter %v", spec, err, ss.Backoff.Jitter)
		}
	}
}

// TestSchedSpecReaderMatchesDecode: what readSchedSpec takes, decode reads
// the same, for specs the codec wrote (every field filled, plain ones with
// values at the codec's edges) and for damaged ones; it takes the plain
// ones.
func TestSchedSpecReaderMatchesDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	f := &filler{t: t, rnd: rand.New(rand.NewPCG(15, 16))}
	e := edgeValues{rng}
	taken := 0
	for i := range 4000 {
		var spec JobSpec
		switch i % 4 {
		case 0:
			f.fill(reflect.ValueOf(&spec).Elem(), "JobSpec")
		case 1:
			spec = JobSpec{Command: []string{"sh", "-c", e.str()}, Namespace: e.str(), Queue: e.str(), User: e.str(),
				Driver: e.str(), OnGPUError: e.str(), Priority: int(e.i64()), MaxAttempts: int(e.i64()),
				Resources: Resources{CPU: e.i64(), MemoryMB: e.i64(), GPUMemoryMiB: e.i64()},
				Labels:    map[string]string{e.str(): e.str()}, Env: map[string]string{"A": e.str()}, Image: e.str()}
		case 2:
			// As the API stores it: a backoff, constraints.
			spec = JobSpec{Command: []string{"true"}, Constraints: []string{"sim == " + e.str(), e.str()},
				Backoff: Backoff{Initial: Duration(e.i64()), Multiplier: edgeFloats[rng.IntN(len(edgeFloats))],
					Max: Duration(e.i64()), Jitter: edgeFloats[rng.IntN(len(edgeFloats))]}, Placement: "binpack"}
		default:
			spec = JobSpec{Command: []string{"true"}, Resources: Resources{CPU: 100, MemoryMB: 64}, Priority: 50}
		}
		raw, err := encode(&spec)
		if err != nil {
			t.Fatal(err)
		}
		var ss schedSpec
		if readSchedSpec(raw, &ss) {
			taken++
		} else if i%4 == 3 {
			t.Fatalf("a plain spec went to decode: %x", raw)
		}
		checkSchedSpecRead(t, raw)
		for range 4 {
			checkSchedSpecRead(t, damaged(rng, raw))
		}
	}
	if taken < 2000 {
		t.Fatalf("only %d of 4000 specs read by hand", taken)
	}
	// A spec as the API stores it (the defaults filled in) is read by hand.
	api := JobSpec{Name: "bench", Labels: map[string]string{"bench": "x"}, Command: []string{"true"}, Network: "none",
		Priority: 50, Placement: "binpack", Constraints: []string{"sim == x"}, KillSignal: "SIGTERM",
		KillTimeout: Duration(10 * time.Second), MaxAttempts: 1,
		Backoff: Backoff{Initial: Duration(time.Second), Multiplier: 2, Max: Duration(5 * time.Minute), Jitter: 0.2}}
	raw, err := encode(&api)
	if err != nil {
		t.Fatal(err)
	}
	var ss schedSpec
	if !readSchedSpec(raw, &ss) || ss.Backoff != api.Backoff || ss.Constraints[0] != "sim == x" {
		t.Fatalf("the API's spec was not read by hand: %x", raw)
	}
	t.Logf("%d of 4000 specs read by hand", taken)
}

// TestSchedSpecKeysKnown: every field of schedSpec is one readSchedSpec
// reads, passes over (specSkipped), or leaves to decode; a field added to
// JobSpec and schedSpec must be sorted into one of them.
func TestSchedSpecKeysKnown(t *testing.T) {
	read := map[string]bool{"namespace": true, "driver": true, "user": true, "queue": true, "on_gpu_error": true,
		"priority": true, "max_attempts": true, "resources": true, "constraints": true, "backoff": true}
	structured := map[string]bool{"no_retry_exit_codes": true, "deadline": true,
		"depends_on": true, "condition": true, "after": true, "volumes": true, "array": true, "notify": true,
		"gang": true, "preemptible": true}
	skippedType := reflect.TypeOf(skipped{})
	typ := reflect.TypeOf(schedSpec{})
	for i := range typ.NumField() {
		fld := typ.Field(i)
		key, _, _ := strings.Cut(fld.Tag.Get("json"), ",")
		switch {
		case fld.Type == skippedType && !specSkipped[key]:
			t.Errorf("schedSpec skips %q but readSchedSpec does not pass over it", key)
		case fld.Type != skippedType && !read[key] && !structured[key]:
			t.Errorf("schedSpec reads %q but readSchedSpec neither reads it nor leaves it to decode", key)
		}
	}
	if n := reflect.TypeOf(JobSpec{}).NumField(); n != typ.NumField() {
		t.Errorf("JobSpec has %d fields, schedSpec %d", n, typ.NumField())
	}
}

// FuzzSchedSpecReader: on any bytes, readSchedSpec never panics, and what
// it takes decode reads as the same scheduling fields.
func FuzzSchedSpecReader(f *testing.F) {
	for i := range 10 {
		spec := JobSpec{Command: []string{"true"}, Resources: Resources{CPU: int64(100 * i), MemoryMB: 64}, Priority: i, Queue: "q"}
		b, _ := encode(&spec)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSchedSpecRead(t, b)
	})
}
