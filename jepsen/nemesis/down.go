package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/foreman-sched/foreman/jepsen/rig"
)

// DownClient declares a live client dead, as an operator's `foreman node
// down` would by mistake, and again every second for the whole fault
// window: the client keeps running and beating, and the leader commits it
// alive again each time it hears it. Its attempts may be declared lost
// only once the lease and margin have passed since the leader last heard
// from it, which a beating client never allows. The checkers must see no
// attempt run twice at once and no job lost. (A planner that timed the
// lost rule from its election instead of the last beat fails this row.)
type DownClient struct {
	bg background
}

func (d *DownClient) Name() string { return "down-client" }

func (d *DownClient) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	v, err := randomClient(c, rng)
	if err != nil {
		return "", err
	}
	name := c.Nodes[v].Name
	if err := declareDown(ctx, c, name); err != nil {
		return "", err
	}
	d.bg.run(func(stop <-chan struct{}) {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				_ = declareDown(ctx, c, name) // a failed one is retried a second later
			}
		}
	})
	return "node down " + name + " every second (it keeps running)", nil
}

func (d *DownClient) Stop(context.Context, *rig.Cluster) error {
	d.bg.halt()
	return nil
}

// declareDown runs `node down name` through the first server that answers.
func declareDown(ctx context.Context, c *rig.Cluster, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var last error
	for _, s := range c.Servers() {
		cl := c.Client(s)
		status, err := cl.NodeDown(ctx, name)
		cl.Close()
		if err == nil && status/100 == 2 {
			return nil
		}
		last = fmt.Errorf("node down %s through %s: status %d: %v", name, c.Nodes[s].Name, status, err)
	}
	return last
}
