package exec

import (
	"testing"
	"time"
)

// TestOverWatch: a job is reported once, after staying over for more than
// the grace; dipping under starts the count again.
func TestOverWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	o := newOverWatch(10 * time.Second)
	steps := []struct {
		sec  int
		over bool
		fire bool
	}{
		{0, true, false}, {6, true, false}, {8, false, false}, // dipped under: the count restarts
		{10, true, false}, {20, true, false}, // exactly the grace: not yet
		{21, true, true}, {30, true, false}, // once
	}
	for _, s := range steps {
		if got := o.observe(at(s.sec), "a", s.over); got != s.fire {
			t.Fatalf("at %ds over=%v: fired %v, want %v", s.sec, s.over, got, s.fire)
		}
	}
	o.keep(map[string]bool{})
	if len(o.since)+len(o.fired) != 0 {
		t.Fatalf("ended attempts kept: %v %v", o.since, o.fired)
	}
}

func TestGPUMemorySlack(t *testing.T) {
	for _, c := range []struct{ share, slack int64 }{{1024, 256}, {20480, 1024}, {61440, 3072}} {
		if got := gpuMemorySlack(c.share); got != c.slack {
			t.Errorf("slack of %d MiB = %d, want %d", c.share, got, c.slack)
		}
	}
}
