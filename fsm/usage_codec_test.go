package fsm

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestUsageCodecMatchesEncode: the hand-written record codec writes
// exactly what the reflection codec writes, and reads it back.
func TestUsageCodecMatchesEncode(t *testing.T) {
	edges := []int64{0, 1, 23, 24, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -24, -25, -256, -257, -65537, math.MinInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var u Usage
		for j, p := range usageValues(&u) {
			if i < len(edges) {
				*p = edges[(i+j)%len(edges)]
			} else {
				*p = rng.Int64N(1<<(rng.IntN(62)+1)) - int64(rng.IntN(2))*rng.Int64N(1000)
			}
		}
		want, err := encode(&u)
		if err != nil {
			t.Fatal(err)
		}
		got := appendUsage(nil, &u)
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: appendUsage %x, encode %x", u, got, want)
		}
		if len(got) > usageRecordMax {
			t.Fatalf("%+v: %d bytes > usageRecordMax %d", u, len(got), usageRecordMax)
		}
		var back Usage
		if !readUsage(got, &back) || back != u {
			t.Fatalf("%+v: readUsage gave %+v", u, back)
		}
	}
}

// TestDecodeUsageFallsBack: a record readUsage does not take (another
// key order, a longer integer head) is still read by decode, and garbage
// is corruption.
func TestDecodeUsageFallsBack(t *testing.T) {
	// {"attempts": 2} with a one-byte head for 2: valid CBOR, not canonical.
	odd := append([]byte{0xa1}, appendCBORText(nil, "attempts")...)
	odd = append(odd, 0x18, 0x02)
	var u Usage
	if readUsage(odd, &u) {
		t.Fatal("readUsage took a record appendUsage never writes")
	}
	if err := decodeUsage(odd, &u); err != nil || u.Attempts != 2 {
		t.Fatalf("decodeUsage: %+v, %v", u, err)
	}
	good := appendUsage(nil, &Usage{Attempts: 3})
	for _, bad := range [][]byte{{0xff}, good[:len(good)-1], append(good, 0)} {
		if err := decodeUsage(bad, &u); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeUsage(%x): %v, want ErrCorrupt", bad, err)
		}
	}
}

// TestSpecLabelsMatchesDecode: the labels walk of a stored spec finds
// what decoding it finds, for specs the codec wrote (the walk must take
// them all), and a spec it does not take is decoded instead.
func TestSpecLabelsMatchesDecode(t *testing.T) {
	want := []string{"a", "project", "team", "zz"}
	specs := []JobSpec{
		{Command: []string{"true"}},
		{Command: []string{"true"}, Labels: map[string]string{}},
		{Command: []string{"sh", "-c", "x"}, Namespace: "ml", Labels: map[string]string{"team": "vision", "other": "x", "a": ""},
			Env: map[string]string{"labels": "not these", "team": "nor this"}, Resources: Resources{CPU: 2000, MemoryMB: 512, Named: map[string]int64{"gpu": 1}},
			Constraints: []string{"os == linux"}, NoRetryExitCodes: []int{3, 4}, Priority: -5},
		{Command: []string{"x"}, Labels: map[string]string{"zz": "1", "project": "p", "team": "t", "a": "b", "longer-key": strings.Repeat("v", 300)}},
	}
	for i, sp := range specs {
		raw, err := encode(&sp)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := scanSpecLabels(raw, want)
		if !ok {
			t.Fatalf("spec %d: the walk refused a spec the codec wrote: %x", i, raw)
		}
		var s usageSpecLabels
		if err := decode(raw, &s); err != nil {
			t.Fatal(err)
		}
		if exp := pickLabels(s.Labels, want); got != exp {
			t.Fatalf("spec %d: walk %+v, decode %+v", i, got, exp)
		}
	}
	// {"labels": {"team": "t"}, "a": 1}: keys out of the codec's order.
	odd := append([]byte{0xa2}, appendCBORText(nil, "labels")...)
	odd = append(odd, 0xa1)
	odd = appendCBORText(appendCBORText(odd, "team"), "t")
	odd = append(appendCBORText(odd, "a"), 0x01)
	if _, ok := scanSpecLabels(odd, want); ok {
		t.Fatal("the walk took keys out of order")
	}
	lv, err := specLabels(odd, want)
	if err != nil || !lv.ok[2] || lv.v[2] != "t" || lv.ok[0] {
		t.Fatalf("specLabels of an unsorted spec: %+v, %v", lv, err)
	}
	if _, err := specLabels([]byte{0xa1, 0x61}, want); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("specLabels of garbage: %v, want ErrCorrupt", err)
	}
}
