package nemesis

import "sync"

// background is the goroutines a nemesis runs through its fault window,
// stopped together when the window ends.
type background struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

// run starts fn in a goroutine; stop is closed by halt.
func (b *background) run(fn func(stop <-chan struct{})) {
	if b.stop == nil {
		b.stop = make(chan struct{})
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn(b.stop)
	}()
}

// halt stops the goroutines and waits for them (none running: nothing).
func (b *background) halt() {
	if b.stop != nil {
		close(b.stop)
		b.wg.Wait()
		b.stop = nil
	}
}
