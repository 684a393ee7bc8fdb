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

// edgeValues makes values at the codec's edges: strings empty, long,
// non-ASCII or not UTF-8, integers at the CBOR head bounds, times zero or
// in other locations with any nanoseconds.
type edgeValues struct{ rng *rand.Rand }

var edgeInts = []int64{0, 1, -1, 23, 24, -24, -25, 255, 256, -256, -257, 65535, 65536, -65536, -65537,
	math.MaxUint32, math.MaxUint32 + 1, -math.MaxUint32 - 1, math.MaxInt64, math.MinInt64}

func (e edgeValues) i64() int64 {
	if e.rng.IntN(2) == 0 {
		return edgeInts[e.rng.IntN(len(edgeInts))]
	}
	return e.rng.Int64N(1<<(e.rng.IntN(62)+1)) - int64(e.rng.IntN(2))*e.rng.Int64N(1<<40)
}

func (e edgeValues) u64() uint64 {
	if e.rng.IntN(4) == 0 {
		return math.MaxUint64 - uint64(e.rng.IntN(2))
	}
	return uint64(e.i64()) & math.MaxInt64
}

func (e edgeValues) str() string {
	lengths := []int{0, 1, 23, 24, 255, 256, 65535, 65536}
	switch e.rng.IntN(8) {
	case 0:
		return ""
	case 1:
		return "héllo ✓ 世界"
	case 2:
		return "\xff\xfe\x80bad utf-8"
	case 3:
		return strings.Repeat("x", lengths[e.rng.IntN(len(lengths))])
	case 4:
		b := make([]byte, e.rng.IntN(40))
		for i := range b {
			b[i] = byte(e.rng.IntN(256))
		}
		return string(b)
	default:
		return "job-" + string(rune('a'+e.rng.IntN(26)))
	}
}

func (e edgeValues) tm() time.Time {
	locs := []*time.Location{time.UTC, time.Local, time.FixedZone("E", 5*3600+30*60), time.FixedZone("W", -8*3600)}
	nanos := []int{0, 1, 10, 100000, 120000000, 123456789, 999999999, 500000000}
	switch e.rng.IntN(6) {
	case 0:
		return time.Time{}
	case 1:
		return time.Date(e.rng.IntN(10000), time.Month(1+e.rng.IntN(12)), 1+e.rng.IntN(28), e.rng.IntN(24), e.rng.IntN(60), e.rng.IntN(60),
			nanos[e.rng.IntN(len(nanos))], locs[e.rng.IntN(len(locs))])
	case 2:
		return time.Now() // with a monotonic reading
	default:
		return time.Unix(1_600_000_000+e.rng.Int64N(1e9), int64(nanos[e.rng.IntN(len(nanos))])).In(locs[e.rng.IntN(len(locs))])
	}
}

// randomAttempt is an attempt with edgeValues; fallback also sets a field
// appendAttempt leaves to encode, now and then.
func randomAttempt(rng *rand.Rand, fallback bool) Attempt {
	e := edgeValues{rng}
	i64, u64, str, tm := e.i64, e.u64, e.str, e.tm
	states := []AttemptState{AttemptAssigned, AttemptRunning, AttemptSucceeded, AttemptFailed, AttemptLost, AttemptKilled, "", "weird"}
	a := Attempt{
		JobID: str(), Num: int(i64()), Node: str(), State: states[rng.IntN(len(states))], FencingToken: u64(), Counted: rng.IntN(2) == 0,
		AssignedAt: tm(), StartedAt: tm(), FinishedAt: tm(), OOM: rng.IntN(2) == 0, ModifyIndex: u64(),
	}
	if rng.IntN(2) == 0 {
		a.Reason, a.CancelRequested, a.Signal, a.StderrTail, a.Warning = str(), str(), str(), str(), str()
		a.PeakMemoryB, a.CPUTimeNs = i64(), i64()
	}
	if rng.IntN(2) == 0 {
		a.Resources = Resources{CPU: i64(), MemoryMB: i64(), GPUMemoryMiB: i64()}
	}
	switch rng.IntN(3) {
	case 0:
		code := int(i64())
		a.ExitCode = &code
	case 1:
		code := 0
		a.ExitCode = &code
	}
	switch rng.IntN(3) {
	case 0:
		a.Result = []byte{}
	case 1:
		a.Result = []byte(str())
	}
	if rng.IntN(10) == 0 {
		a.Resources.Named = map[string]int64{} // empty: still written by hand
		a.Artifacts, a.GPUs = []Artifact{}, []GPU{}
	}
	if fallback {
		switch rng.IntN(6) {
		case 0:
			a.Artifacts = []Artifact{{Path: "out.txt", Size: 3}}
		case 1:
			a.Outputs = &Outputs{}
		case 2:
			a.Task = &GangTask{}
		case 3:
			a.GPUs = []GPU{{UUID: "GPU-1"}}
		case 4:
			a.GPUShare = &GPUShare{}
		case 5:
			a.Resources.Named = map[string]int64{"gpu": 1}
		}
	}
	return a
}

// attemptHandFree reports whether appendAttempt must write a.
func attemptHandFree(a *Attempt) bool {
	return len(a.Artifacts) == 0 && a.Outputs == nil && a.Task == nil && len(a.GPUs) == 0 && a.GPUShare == nil &&
		len(a.Resources.Named) == 0
}

// TestAttemptCodecMatchesEncode: the hand-written attempt codec writes
// exactly what the reflection codec writes, for every attempt it takes
// (which must be every one without GPUs, artifacts, outputs, a gang task
// or named resources), and reads back what decode reads.
func TestAttemptCodecMatchesEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	handled := 0
	for i := range 5000 {
		a := randomAttempt(rng, i%5 == 4)
		want, ok := checkHandCodec(t, &a, attemptHandFree(&a), attemptCodec)
		if ok {
			handled++
		}
		checkAttemptFastRead(t, want)

		// Damaged records: readAttempt takes only what decode reads the same.
		for range 4 {
			checkAttemptFastRead(t, damaged(rng, want))
		}
	}
	if handled < 3000 {
		t.Fatalf("only %d attempts written by hand", handled)
	}
}

// attemptCodec is the attempt record's hand codec, for checkHandCodec.
var attemptCodec = handCodec[Attempt]{write: appendAttempt, size: attemptRecordSize, encode: encodeAttempt, read: readAttempt}

// handCodec is a record's hand-written codec: its writer, the room it
// needs, the record's encoder (the writer, else encode) and its reader.
type handCodec[T any] struct {
	write  func([]byte, *T) ([]byte, bool)
	size   func(*T) int
	encode func(*T) ([]byte, error)
	read   func([]byte, *T) bool
}

// checkHandCodec checks one record v: the writer takes it exactly when
// handFree and then writes encode's bytes, within size; the record's
// encoder writes encode's bytes either way; the reader takes exactly what
// the writer writes, reads what decode reads, and keeps none of the
// input's bytes (bbolt's memory). It returns encode's bytes and whether
// the writer took v.
func checkHandCodec[T any](t *testing.T, v *T, handFree bool, c handCodec[T]) ([]byte, bool) {
	t.Helper()
	want, err := encode(v)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := c.write(nil, v)
	if ok != handFree {
		t.Fatalf("%+v: the hand writer took it: %v", v, ok)
	}
	if ok && !bytes.Equal(got, want) {
		t.Fatalf("%+v:\nhand writer %x\nencode      %x", v, got, want)
	}
	if ok && len(got) > c.size(v) {
		t.Fatalf("%+v: %d bytes > size %d", v, len(got), c.size(v))
	}
	if enc, err := c.encode(v); err != nil || !bytes.Equal(enc, want) {
		t.Fatalf("%+v: the record's encoder %x, %v; encode %x", v, enc, err, want)
	}
	var dec, fast T
	derr := decode(want, &dec)
	fok := c.read(want, &fast)
	switch {
	case derr != nil && fok:
		t.Fatalf("the hand reader took %x, decode: %v", want, derr)
	case derr == nil && ok && !fok:
		t.Fatalf("%+v: the hand reader refused what the writer wrote: %x", v, want)
	case !ok && fok:
		t.Fatalf("%+v: the hand reader took a record the writer does not write", v)
	case fok && !reflect.DeepEqual(fast, dec):
		t.Fatalf("hand reader:\n%+v\ndecode:\n%+v", fast, dec)
	}
	if fok {
		scratch := bytes.Clone(want)
		var again T
		c.read(scratch, &again)
		clear(scratch)
		if !reflect.DeepEqual(again, dec) {
			t.Fatalf("the record read changed with the bytes it was read from: %+v", again)
		}
	}
	return want, ok
}

// checkAttemptFastRead: what readAttempt takes, decode reads the same,
// and decodeAttempt agrees with decode either way.
func checkAttemptFastRead(t *testing.T, b []byte) {
	t.Helper()
	checkFastRead(t, b, readAttempt, decodeAttempt)
}

// damaged is a copy of b cut short, with a byte flipped, or with a byte
// added.
func damaged(rng *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	switch rng.IntN(3) {
	case 0:
		return b[:rng.IntN(len(b))]
	case 1:
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		return b
	default:
		return append(b, byte(rng.IntN(256)))
	}
}

// checkFastRead: what a hand-written reader takes, decode reads the
// same, and the record's decoder (the reader, else decode) agrees with
// decode either way, refusing only with ErrCorrupt.
func checkFastRead[T any](t *testing.T, b []byte, read func([]byte, *T) bool, decodeRecord func([]byte, *T) error) {
	t.Helper()
	var fast, dec T
	fok := read(b, &fast)
	derr := decode(b, &dec)
	if fok && (derr != nil || !reflect.DeepEqual(fast, dec)) {
		t.Fatalf("%x: the hand reader gave %+v; decode %+v, %v", b, fast, dec, derr)
	}
	var via T
	err := decodeRecord(b, &via)
	if (err != nil) != (derr != nil) || (err == nil && !reflect.DeepEqual(via, dec)) {
		t.Fatalf("%x: the record's decoder gave %+v, %v; decode %+v, %v", b, via, err, dec, derr)
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%x: the record's decoder: %v, want ErrCorrupt", b, err)
	}
}

// TestDecodeAttemptFallsBack: records readAttempt does not take (keys out
// of order, an unknown key, a longer head, zero values the codec leaves
// out) are read by decode.
func TestDecodeAttemptFallsBack(t *testing.T) {
	code := 2
	base := Attempt{JobID: "j", Num: 1, Node: "n", State: AttemptRunning, ExitCode: &code, Counted: true,
		AssignedAt: time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC), Resources: Resources{CPU: 100}}
	good, ok := appendAttempt(nil, &base)
	if !ok {
		t.Fatal("appendAttempt refused a plain attempt")
	}
	var a Attempt
	if !readAttempt(good, &a) || !reflect.DeepEqual(a, base) {
		t.Fatalf("readAttempt: %+v", a)
	}
	withKey := func(key string, val ...byte) []byte { // good with one more entry at the end
		b := append([]byte{good[0] + 1}, good[1:]...)
		return append(appendCBORText(b, key), val...)
	}
	cases := map[string][]byte{
		"unknown key":     withKey("zzzzzzzzzzzzzzzzzzzzz", 0x01),
		"oom false":       append(append([]byte{good[0] + 1}, appendCBORText(nil, "oom")...), append([]byte{cborFalse}, good[1:]...)...),
		"empty warning":   withKey("warning", 0x60),
		"duplicate token": withKey("fencing_token", 0x01),
	}
	// "attempt": 1 with a one-byte head: valid CBOR, not the codec's.
	i := bytes.Index(good, appendCBORText(nil, "attempt"))
	long := append(append(bytes.Clone(good[:i+8]), 0x18, 0x01), good[i+9:]...)
	cases["long head"] = long
	for name, b := range cases {
		if readAttempt(b, &Attempt{}) {
			t.Errorf("%s: readAttempt took %x", name, b)
		}
		checkAttemptFastRead(t, b)
	}
	var back Attempt
	if err := decodeAttempt(long, &back); err != nil || !reflect.DeepEqual(back, base) {
		t.Fatalf("decodeAttempt of a long head: %+v, %v", back, err)
	}
	for _, bad := range [][]byte{{0xff}, good[:len(good)-1], append(bytes.Clone(good), 0), nil} {
		if err := decodeAttempt(bad, &Attempt{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeAttempt(%x): %v, want ErrCorrupt", bad, err)
		}
	}
}

// FuzzAttemptCodec: on any bytes, readAttempt never panics, and what it
// takes decode reads as the same attempt.
func FuzzAttemptCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		a := randomAttempt(rng, false)
		b, _ := encode(&a)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAttemptFastRead(t, b)
	})
}

var attemptSink []byte

func benchAttempt() Attempt {
	code := 0
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)
	return Attempt{JobID: "01JQ8ZK3M5T7V9X1Z3B5D7F9H1", Num: 1, Node: "node-017", State: AttemptSucceeded, FencingToken: 123456,
		Counted: true, Resources: Resources{CPU: 1000, MemoryMB: 512}, AssignedAt: at, StartedAt: at.Add(time.Second),
		FinishedAt: at.Add(time.Minute), ExitCode: &code, PeakMemoryB: 52428800, CPUTimeNs: 1234567890, ModifyIndex: 123470}
}

func BenchmarkAttemptEncode(b *testing.B) {
	a := benchAttempt()
	b.Run("reflect", func(b *testing.B) {
		for b.Loop() {
			attemptSink, _ = encode(&a)
		}
	})
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			attemptSink, _ = encodeAttempt(&a)
		}
	})
}

func BenchmarkAttemptDecode(b *testing.B) {
	a := benchAttempt()
	v, _ := encode(&a)
	b.Run("reflect", func(b *testing.B) {
		for b.Loop() {
			var out Attempt
			_ = decode(v, &out)
		}
	})
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			var out Attempt
			_ = decodeAttempt(v, &out)
		}
	})
}
