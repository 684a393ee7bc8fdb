package cluster

import (
	"iter"
	"time"
)

// ticks yields the time every d until stop is closed: the loop of a
// node's periodic work (sync checks, compaction, spreading clients,
// releasing the log's pages). A body that breaks ends it too.
func ticks(d time.Duration, stop <-chan struct{}) iter.Seq[time.Time] {
	return func(yield func(time.Time) bool) {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				if !yield(now) {
					return
				}
			}
		}
	}
}
