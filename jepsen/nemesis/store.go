package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/foreman-sched/foreman/jepsen/rig"
)

// StoreDown stops the cluster's object store (the S3 server, SIGTERM) for
// the fault window and starts it again on the same ports and data: uploads
// that finish meanwhile must be retried, stay pending (never claimed
// stored) and arrive once it is back.
type StoreDown struct{ stopped bool }

func (s *StoreDown) Name() string { return "store-down" }

func (s *StoreDown) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	if c.Store == nil {
		return "", fmt.Errorf("store-down: the cluster has no object store (workload outputs)")
	}
	c.Store.Stop()
	s.stopped = true
	return "object store stopped", nil
}

func (s *StoreDown) Stop(ctx context.Context, c *rig.Cluster) error {
	if !s.stopped || c.Store == nil {
		return nil
	}
	s.stopped = false
	return c.Store.Start(90 * time.Second)
}

// StoreDownKill stops the object store, waits (at most 10 s) until a node
// has finished attempts whose uploads are pending (its
// foreman_outputs_uploads_pending gauge), and kills -9 the node with the
// most: a kill that lands mid-upload for sure (kill-random only does by
// chance; an upload takes tens of milliseconds). Heal restarts the node
// first (it must resume the uploads from their markers, against a store
// still down), then the store.
type StoreDownKill struct {
	StoreDown
	victim int
}

func (s *StoreDownKill) Name() string { return "store-down-kill" }

func (s *StoreDownKill) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	s.victim = -1
	info, err := s.StoreDown.Start(ctx, c, rng)
	if err != nil {
		return info, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		best, most := -1, 0.0
		for _, i := range running(c) {
			if c.Nodes[i].Client {
				continue
			}
			cl := c.Client(i)
			v, err := cl.Metric(ctx, "foreman_outputs_uploads_pending")
			cl.Close()
			if err == nil && v > most {
				best, most = i, v
			}
		}
		if best >= 0 || time.Now().After(deadline) {
			if best < 0 {
				return info, fmt.Errorf("no node had an upload pending within 10 s of the store's stop")
			}
			s.victim = best
			return fmt.Sprintf("%s; kill -9 %s with %.0f uploads pending", info, c.Nodes[best].Name, most), c.Nodes[best].Kill9()
		}
		time.Sleep(250 * time.Millisecond) // polling the gauges while finishes pile up
	}
}

func (s *StoreDownKill) Stop(ctx context.Context, c *rig.Cluster) error {
	var err error
	if s.victim >= 0 && !c.Nodes[s.victim].Running() {
		err = c.Restart(s.victim)
	}
	return errors.Join(err, s.StoreDown.Stop(ctx, c))
}
