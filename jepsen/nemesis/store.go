package nemesis

import (
	"context"
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
