package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/jepsen/checker"
	"github.com/foreman-sched/foreman/jepsen/rig"
)

// Storm is a burst of jobs that saturate the CPU (issue 13): busy loops
// without resource requests, submitted as fast as the API takes them, on
// one node (through a label constraint; the leader half the time) or on
// all of them. The cluster must keep its invariants, its leader and its
// API meanwhile; admission keeps the excess queued. Stop cancels every
// storm job, so the workload's drain runs on a calm cluster.
//
// Storm jobs carry idempotency keys starting with checker.LoadKeyPrefix:
// the queue checker leaves them out (they are not the workload's), the
// other checkers (one live execution, fencing, state hashes) cover them
// like any job.
type Storm struct {
	// Jobs is the burst's size (default 300: beyond what admission lets
	// three 2-core nodes run at once).
	Jobs int

	mu  sync.Mutex
	ids map[int][]string // by the node index that accepted them
	seq int
}

func (s *Storm) Name() string { return "storm" }

func (s *Storm) Start(ctx context.Context, c *rig.Cluster, rng *rand.Rand) (string, error) {
	n := s.Jobs
	if n == 0 {
		n = 300
	}
	var cons []string
	where := "all nodes"
	if rng.IntN(2) == 0 {
		t, err := target(ctx, c, rng, rng.IntN(2) == 0)
		if err != nil {
			return "", err
		}
		where = c.Nodes[t].Name
		cons = []string{"jepsen_node == " + where}
	}
	s.mu.Lock()
	s.ids = map[int][]string{}
	s.seq++
	round := s.seq
	s.mu.Unlock()
	spec := map[string]any{
		"command":      []string{"sh", "-c", "while :; do :; done"},
		"max_attempts": 1,
		"timeout":      "2m", // Stop cancels them; this bounds a storm whose Stop never came
		"constraints":  cons,
	}
	// Four submitters per running node: the burst arrives at once.
	var wg sync.WaitGroup
	var accepted, refused sync.Map
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for _, ni := range running(c) {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := c.Client(ni)
				for i := range next {
					sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					id, _, err := cl.Submit(sctx, spec, fmt.Sprintf("%s%d-%d", checker.LoadKeyPrefix, round, i))
					cancel()
					if err != nil {
						refused.Store(i, err.Error())
						continue
					}
					accepted.Store(i, id)
					s.mu.Lock()
					s.ids[ni] = append(s.ids[ni], id)
					s.mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	acc, ref := 0, 0
	accepted.Range(func(any, any) bool { acc++; return true })
	refused.Range(func(any, any) bool { ref++; return true })
	return fmt.Sprintf("storm of %d cpu-bound jobs without requests on %s: %d accepted, %d refused or indeterminate", n, where, acc, ref), nil
}

// Stop cancels every storm job through the node that accepted it (any
// node forwards the cancel to the leader).
func (s *Storm) Stop(ctx context.Context, c *rig.Cluster) error {
	s.mu.Lock()
	ids := s.ids
	s.ids = nil
	s.mu.Unlock()
	var firstErr error
	for ni, list := range ids {
		for _, id := range list {
			for try := 0; ; try++ {
				cl := c.Client(ni)
				if !c.Nodes[ni].Running() {
					cl = c.Client(running(c)[0])
				}
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				status, err := cl.Cancel(sctx, id)
				cancel()
				if err == nil || status == http.StatusConflict || status == http.StatusNotFound {
					break // cancelled, or already over
				}
				if try == 5 {
					if firstErr == nil {
						firstErr = fmt.Errorf("cancel storm job %s: %w", id, err)
					}
					break
				}
				time.Sleep(time.Second) // a leader change under the storm: try again
			}
		}
	}
	return firstErr
}
