package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestKeepStreamingFollowsAMove: a stream that ends with a MovedTo is
// followed at once (no backoff wait) by one to the server it names, and
// the one after that goes on through the list.
func TestKeepStreamingFollowsAMove(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	var waits []time.Duration
	stream := func(_ context.Context, server string) (bool, time.Duration, error) {
		got = append(got, server)
		switch len(got) {
		case 1:
			return true, time.Hour, MovedTo("http://moved")
		case 3:
			cancel()
		}
		return true, 0, errors.New("ended")
	}
	start := time.Now()
	err := KeepStreaming(ctx, []string{"http://a"}, stream, func(_ string, _ error, wait time.Duration) { waits = append(waits, wait) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("KeepStreaming = %v, want context.Canceled", err)
	}
	if want := []string{"http://a", "http://moved", "http://a"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("streams to %v, want %v", got, want)
	}
	if waits[0] != 0 || time.Since(start) > time.Second {
		t.Fatalf("a move waited (%v; %v in all), want at once", waits[0], time.Since(start))
	}
}
