package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/jepsen/rig"
)

// Clock skews the wall clocks of random nodes, the leader first, through
// the agent's test-build clock hook (rig.Node.SetClock): bumps of ±0.2 s
// to ±4 min, resets of one node, and strobes (one node flipped between +x
// and -x a few times) every Every, until stopped; heal sets every offset
// back to zero. Only wall-clock readings move; durations (leases, raft
// contact, timeouts) stay on each agent's monotonic clock, as on a host
// whose clock is wrong.
type Clock struct {
	Every time.Duration // between changes; 0 = 2 s

	bg background

	mu            sync.Mutex
	ahead, behind time.Duration // extremes ever applied
	log           []string
	errs          []error
	t0            time.Time
}

// Skewer is a nemesis that moves wall clocks. Skew returns the largest
// offsets it applied ahead of and behind the true time: the bound by which
// a job's run_at may fire early or late.
type Skewer interface {
	Skew() (ahead, behind time.Duration)
}

// Logger is a nemesis with a log of what it did, for the report.
type Logger interface {
	Log() []string
}

func (k *Clock) Name() string { return "clock" }

func (k *Clock) Skew() (ahead, behind time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ahead, k.behind
}

func (k *Clock) Log() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.log...)
}

// randomOffset is exponential-ish like Jepsen's bump: seconds, tens of
// seconds or minutes, either sign, never zero.
func randomOffset(rng *rand.Rand) time.Duration {
	var lo, hi time.Duration
	switch rng.IntN(3) {
	case 0:
		lo, hi = 200*time.Millisecond, 5*time.Second
	case 1:
		lo, hi = 5*time.Second, 60*time.Second
	default:
		lo, hi = 60*time.Second, 240*time.Second
	}
	d := lo + time.Duration(rng.Int64N(int64(hi-lo)))
	if rng.IntN(2) == 0 {
		d = -d
	}
	return d.Round(time.Millisecond)
}

func (k *Clock) set(c *rig.Cluster, i int, d time.Duration) error {
	n := c.Nodes[i]
	err := n.SetClock(d)
	k.mu.Lock()
	defer k.mu.Unlock()
	at := time.Since(k.t0).Round(100 * time.Millisecond)
	if err != nil {
		k.errs = append(k.errs, err)
		k.log = append(k.log, fmt.Sprintf("+%v %s %+v: %v", at, n.Name, d, err))
		return err
	}
	k.ahead, k.behind = max(k.ahead, d), max(k.behind, -d)
	k.log = append(k.log, fmt.Sprintf("+%v %s %+v", at, n.Name, d))
	return nil
}

func (k *Clock) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	if k.Every == 0 {
		k.Every = 2 * time.Second
	}
	k.t0 = time.Now()
	l, err := target(ctx, c, rng, true)
	if err != nil {
		return "", err
	}
	first := randomOffset(rng)
	if err := k.set(c, l, first); err != nil {
		return "", err
	}
	r := rand.New(rand.NewPCG(rng.Uint64(), 11))
	k.bg.run(func(stop <-chan struct{}) {
		for step := 0; step < 100000; step++ {
			select {
			case <-stop:
				return
			case <-time.After(k.Every/2 + time.Duration(r.Int64N(int64(k.Every)))):
			}
			nodes := running(c)
			if len(nodes) == 0 {
				continue
			}
			switch p := r.Float64(); {
			case p < 0.6: // bump a random subset
				r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
				for _, i := range nodes[:1+r.IntN(len(nodes))] {
					_ = k.set(c, i, randomOffset(r))
				}
			case p < 0.85: // reset one
				_ = k.set(c, nodes[r.IntN(len(nodes))], 0)
			default: // strobe one
				i, d := nodes[r.IntN(len(nodes))], randomOffset(r)
				for f := 0; f < 4; f++ {
					_ = k.set(c, i, d)
					d = -d
				}
			}
		}
	})
	return fmt.Sprintf("%s (leader) %+v, then bump/reset/strobe random nodes every ~%v", c.Nodes[l].Name, first, k.Every), nil
}

// Stop ends the changes and sets every running node back to true time. It
// reports every offset that could not be applied during the window too: a
// skew that silently did not happen must not pass as tested.
func (k *Clock) Stop(ctx context.Context, c *rig.Cluster) error {
	k.bg.halt()
	if k.t0.IsZero() {
		return nil // never started
	}
	for _, i := range running(c) {
		_ = k.set(c, i, 0)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return errors.Join(k.errs...)
}
