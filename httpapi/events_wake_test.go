package httpapi

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestWakeDelay(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, time.Millisecond}, {10, 10 * time.Millisecond}, {100, 100 * time.Millisecond}, {10000, 100 * time.Millisecond}} {
		if got := wakeDelay(tc.n, time.Millisecond, 100*time.Millisecond); got != tc.want {
			t.Errorf("wakeDelay(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
}

// TestEventStreamsCoalesced: under a stream of commits the streams are
// woken at most once per coalescing delay, and still receive every event
// in order: an unfiltered stream (the shared burst) and a filtered one
// (its own reads), the filtered one opened first so the two start at
// different positions.
func TestEventStreamsCoalesced(t *testing.T) {
	const delay = 50 * time.Millisecond
	a := newTestAPI(t, func(c *Config) { c.EventDelayPerStream, c.EventMaxDelay = delay, delay })
	srv := a.srv.Config.Handler.(*server)
	open := func(query string) <-chan string {
		resp, err := http.Get(a.srv.URL + "/v1/events" + query)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		ids := make(chan string, 1000)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"type":"job.submitted"`) {
					_, rest, _ := strings.Cut(sc.Text(), `"job_id":"`)
					id, _, _ := strings.Cut(rest, `"`)
					ids <- id
				}
			}
			close(ids)
		}()
		return ids
	}
	filtered := open("?topic=job")
	waitFor(t, "the first stream open", func() bool { return a.srvSubscribers() == 1 })
	a.submit(`{"command":["true"]}`) // only the filtered stream sees it
	first := <-filtered
	all := open("")
	waitFor(t, "both streams open", func() bool { return a.srvSubscribers() == 2 })

	w0 := srv.waker.wakeups.Load()
	start := time.Now()
	var want []string
	for range 40 {
		want = append(want, a.submit(`{"command":["true"]}`))
	}
	for name, ch := range map[string]<-chan string{"unfiltered": all, "filtered": filtered} {
		expectIDs(t, name, ch, first, want)
	}
	// Two streams: min(2 × 50 ms, 50 ms) between wake-ups (the first of a
	// quiet spell is at once).
	wakeups := srv.waker.wakeups.Load() - w0
	elapsed := time.Since(start)
	if most := int64(elapsed/delay) + 2; wakeups > most {
		t.Errorf("%d wake-ups for 40 commits in %s, want at most %d", wakeups, elapsed, most)
	}
	t.Logf("%d wake-ups for 40 commits in %s", wakeups, elapsed)
}

// TestUnfilteredStreamsShareBursts: unfiltered streams write the waker's
// shared burst at every wake-up and do not read the ring themselves. (A
// stream that read on past the burst it had just written was off the
// shared path from then on: every stream read and copied every event
// itself, most of the streams' cost under load.)
func TestUnfilteredStreamsShareBursts(t *testing.T) {
	const streams, delay = 3, 5 * time.Millisecond
	a := newTestAPI(t, func(c *Config) { c.EventDelayPerStream, c.EventMaxDelay = delay, delay })
	srv := a.srv.Config.Handler.(*server)
	var chans []chan string
	for range streams {
		resp, err := http.Get(a.srv.URL + "/v1/events")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		ids := make(chan string, 1000)
		go func() {
			defer close(ids)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if _, rest, ok := strings.Cut(sc.Text(), `"type":"job.submitted","job_id":"`); ok {
					id, _, _ := strings.Cut(rest, `"`)
					ids <- id
				}
			}
		}()
		chans = append(chans, ids)
	}
	waitFor(t, "the streams open", func() bool { return a.srvSubscribers() == streams })

	w0, r0 := srv.waker.wakeups.Load(), srv.waker.ownReads.Load()
	var want []string
	for srv.waker.wakeups.Load()-w0 < 10 && len(want) < 500 {
		want = append(want, a.submit(`{"command":["true"]}`))
	}
	for i, ch := range chans {
		expectIDs(t, fmt.Sprint("stream ", i), ch, "", want)
	}
	wakeups, own := srv.waker.wakeups.Load()-w0, srv.waker.ownReads.Load()-r0
	if wakeups < 10 {
		t.Fatalf("only %d wake-ups for %d commits: the test needs several", wakeups, len(want))
	}
	// At most one catch-up per stream (a stream that joined between two
	// wake-ups), not one per stream per wake-up.
	if own > streams {
		t.Errorf("%d own ring reads by %d unfiltered streams over %d wake-ups, want at most %d", own, streams, wakeups, streams)
	}
	t.Logf("%d commits, %d wake-ups, %d own reads", len(want), wakeups, own)
}

// expectIDs reads len(want) job IDs from ch (skipping skip) and checks
// they are want, in order.
func expectIDs(t *testing.T, name string, ch <-chan string, skip string, want []string) {
	t.Helper()
	var got []string
	deadline := time.After(streamTimeout)
	for len(got) < len(want) {
		select {
		case id, ok := <-ch:
			if !ok {
				t.Fatalf("%s ended after %d events", name, len(got))
			}
			if id != skip {
				got = append(got, id)
			}
		case <-deadline:
			t.Fatalf("%s: %d of %d events within %s", name, len(got), len(want), streamTimeout)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: got %v, want %v", name, got, want)
	}
}
