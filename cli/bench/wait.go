package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/foreman-sched/foreman/api"
)

// pause waits d, or until ctx ends: then it returns ctx's error. It is the
// wait between two polls of every bench's poll loop.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// waitTerminal polls job id every interval until it is terminal. A 404 is
// the node asked not having applied the job's submit yet: it polls on.
func waitTerminal(ctx context.Context, cl *api.Client, id string, every time.Duration) (*api.JobDetail, error) {
	for {
		d, err := cl.GetJob(ctx, id)
		if err != nil && !isNotFound(err) {
			return nil, err
		}
		if err == nil && d.Job.State.Terminal() {
			return d, nil
		}
		if err := pause(ctx, every); err != nil {
			return nil, fmt.Errorf("waiting for job %s: %w", id, err)
		}
	}
}
