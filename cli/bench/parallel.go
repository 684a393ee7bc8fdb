package bench

import (
	"sync"
	"sync/atomic"
)

// parallel runs fn(0..n-1) on conc goroutines and returns the first error:
// every call runs, whichever fail. Submits, schedules and reads go out
// conc at a time this way.
func parallel(conc, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
