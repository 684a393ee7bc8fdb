package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/httpapi"
)

// afterChain submits a chain of n jobs up front, each with after on the
// one before (`submit --after ID:ok`), waits for the last, and returns
// the release latencies along it (parent finished → child started) and
// the chain's total time. Unlike a workflow, each link is its own submit
// naming a job that already exists: Slurm's afterok.
func afterChain(ctx context.Context, cl *api.Client, n int, job func(name string) httpapi.JobSpecInput) ([]time.Duration, float64, error) {
	ids := make([]string, 0, n)
	t0 := time.Now()
	for i := range n {
		s := job(fmt.Sprint("a", i))
		if i > 0 {
			s.After = []httpapi.AfterInput{httpapi.After(ids[i-1] + ":ok")}
		}
		id, _, err := submitJob(ctx, cl, s, "")
		if err != nil {
			return nil, 0, fmt.Errorf("after chain, job %d: %w", i, err)
		}
		ids = append(ids, id)
	}
	if _, err := waitTerminal(ctx, cl, ids[len(ids)-1], 5*time.Millisecond); err != nil {
		return nil, 0, err
	}
	secs := round3(time.Since(t0).Seconds())
	lat, err := releaseLatencies(ctx, cl, ids)
	return lat, secs, err
}
