package fsm

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
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
