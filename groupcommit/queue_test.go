package groupcommit

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// waitTimeout bounds every wait for the queue's goroutines (slow CI).
const waitTimeout = 10 * time.Second

func TestQueueGroups(t *testing.T) {
	tests := []struct {
		name    string
		maxSize int
		queued  []int // sizes queued while the one runner is busy
		want    [][]int
	}{
		{"all fit", 10, []int{1, 2, 3}, [][]int{{1, 2, 3}}},
		{"split at the bound", 5, []int{2, 3, 1, 4}, [][]int{{2, 3}, {1, 4}}},
		{"a large first member goes alone", 5, []int{7, 1, 1}, [][]int{{7}, {1, 1}}},
		{"order kept past a member that does not fit", 5, []int{1, 5, 1}, [][]int{{1}, {5}, {1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var got [][]int
			started, release := make(chan struct{}), make(chan struct{})
			done := make(chan struct{}, 64)
			q := New(1, tt.maxSize, func(m int) int { return m }, func(group []int) {
				if slices.Equal(group, []int{0}) {
					close(started)
					<-release // the first group holds the only slot
				} else {
					mu.Lock()
					got = append(got, slices.Clone(group))
					mu.Unlock()
				}
				for range group {
					done <- struct{}{}
				}
			})
			q.Add(0)
			select {
			case <-started:
			case <-time.After(waitTimeout):
				t.Fatal("first group not committed")
			}
			q.Add(tt.queued...)
			if n := q.Queued(); n != len(tt.queued) {
				t.Fatalf("Queued() = %d while the slot is held, want %d", n, len(tt.queued))
			}
			close(release)
			for range 1 + len(tt.queued) {
				select {
				case <-done:
				case <-time.After(waitTimeout):
					t.Fatal("members not committed")
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Fatalf("groups %v, want %v", got, tt.want)
			}
			if n := q.Queued(); n != 0 {
				t.Fatalf("Queued() = %d after the commits, want 0", n)
			}
		})
	}
}

func TestQueueInFlightBound(t *testing.T) {
	const inFlight = 2
	var mu sync.Mutex
	running, most := 0, 0
	release := make(chan struct{})
	var wg sync.WaitGroup
	q := New(inFlight, 1, func(int) int { return 1 }, func(group []int) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		mu.Unlock()
		for range group {
			wg.Done()
		}
	})
	wg.Add(5)
	for i := range 5 {
		q.Add(i)
	}
	deadline := time.Now().Add(waitTimeout)
	for q.Queued() != 5-inFlight {
		if time.Now().After(deadline) {
			t.Fatalf("Queued() = %d, want %d", q.Queued(), 5-inFlight)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if most != inFlight {
		t.Fatalf("at most %d groups committed at once, want %d", most, inFlight)
	}
}
