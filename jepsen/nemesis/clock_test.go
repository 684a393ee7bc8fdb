package nemesis

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestRandomOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var neg, pos, minutes int
	for range 1000 {
		d := randomOffset(rng)
		a := max(d, -d)
		if a < 200*time.Millisecond || a > 240*time.Second {
			t.Fatalf("offset %v out of ±[0.2s, 4m]", d)
		}
		if d < 0 {
			neg++
		} else {
			pos++
		}
		if a >= time.Minute {
			minutes++
		}
	}
	if neg < 400 || pos < 400 || minutes < 250 {
		t.Fatalf("skewed draw: %d behind, %d ahead, %d of a minute or more", neg, pos, minutes)
	}
}
