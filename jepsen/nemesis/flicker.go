package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/foreman-sched/foreman/jepsen/rig"
)

// Flicker pauses every agent for short bursts (SIGSTOP for On, SIGCONT for
// Off) until stopped. The bursts land between steps the agent assumes are
// back to back, e.g. starting a supervisor and dialling its lease socket.
type Flicker struct {
	On, Off time.Duration

	bg background
}

func (f *Flicker) Name() string { return "pause-flicker" }

func (f *Flicker) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	if f.On == 0 {
		f.On, f.Off = 700*time.Millisecond, 300*time.Millisecond
	}
	seed := rng.Uint64()
	for i, n := range c.Nodes {
		f.bg.run(func(stop <-chan struct{}) {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			for k := 0; k < 100000; k++ {
				select {
				case <-stop:
					return
				case <-time.After(f.Off + time.Duration(r.Int64N(int64(f.Off)))):
				}
				if n.Pause() != nil {
					continue
				}
				select {
				case <-stop:
				case <-time.After(f.On):
				}
				_ = n.Resume()
			}
		})
	}
	return fmt.Sprintf("every agent: SIGSTOP %v / SIGCONT %v..%v", f.On, f.Off, 2*f.Off), nil
}

func (f *Flicker) Stop(ctx context.Context, c *rig.Cluster) error {
	f.bg.halt()
	for _, n := range c.Nodes {
		_ = n.Resume()
	}
	return nil
}
