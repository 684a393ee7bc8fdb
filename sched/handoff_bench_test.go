package sched

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// slowRaft is fakeRaft with a commit round: every Apply waits commit
// before it applies, and concurrent applies wait together (as raft commits
// them in one batch).
type slowRaft struct {
	*fakeRaft
	commit time.Duration
}

func (r *slowRaft) Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	time.Sleep(r.commit)
	return r.fakeRaft.Apply(ctx, cmd)
}

// BenchmarkHandoffWaves is `foreman bench sleep` without processes: four
// nodes with one slot each, 20 jobs, each "runs" for run once it is seen
// assigned and then reports success; every apply (reports, placements)
// takes a commit round. It reports the wall time over the ideal (5 waves)
// per wave and the median hand-off (a finish applied → the node's next
// placement applied), for one plan at a time and for plans in flight.
func BenchmarkHandoffWaves(b *testing.B) {
	const (
		nodes  = 4
		jobs   = 20
		run    = 20 * time.Millisecond
		commit = 3 * time.Millisecond
	)
	for _, inFlight := range []int{1, DefaultConfig().PlansInFlight} {
		b.Run(fmt.Sprintf("plans_in_flight=%d", inFlight), func(b *testing.B) {
			var over, handoffs []float64
			for range b.N {
				f, err := fsm.Open(filepath.Join(b.TempDir(), "state.db"), fsm.Options{NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				fr := &fakeRaft{t: b, f: f, leaderSince: time.Now().Add(-time.Hour), heard: map[string]time.Time{}}
				for i := range nodes {
					fr.Apply(context.Background(), mustCommand(fsm.CmdUpsertNode, time.Now(), &fsm.UpsertNode{Node: node(fmt.Sprintf("n%d", i), 1000, 1024)}))
				}
				sr := &slowRaft{fakeRaft: fr, commit: commit}
				cfg := DefaultConfig()
				cfg.PlansInFlight = inFlight
				s, err := New(cfg, Deps{Raft: sr, State: f}, nil)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- s.Run(ctx) }()
				// The executors: one goroutine per attempt seen assigned.
				var mu sync.Mutex
				started := map[string]bool{}
				finished := map[string]time.Time{} // node → last finish applied
				var wg sync.WaitGroup
				left := jobs
				allDone := make(chan struct{})
				watch, stop := f.Watch()
				execDone := make(chan struct{})
				go func() {
					defer close(execDone)
					for {
						select {
						case <-ctx.Done():
							return
						case <-watch:
						}
						var todo []fsm.Attempt
						f.View(func(tx *fsm.Tx) error {
							return tx.LiveAttempts(func(a *fsm.Attempt) bool {
								if a.State == fsm.AttemptAssigned && !started[a.JobID] {
									started[a.JobID] = true
									todo = append(todo, *a)
								}
								return true
							})
						})
						for _, a := range todo {
							mu.Lock()
							if t, ok := finished[a.Node]; ok {
								handoffs = append(handoffs, float64(time.Since(t).Microseconds())/1000)
							}
							mu.Unlock()
							wg.Add(1)
							go func() {
								defer wg.Done()
								time.Sleep(run)
								code := 0
								sr.Apply(ctx, mustCommand(fsm.CmdReport, time.Now(), &fsm.ReportAttempt{JobID: a.JobID, Attempt: a.Num,
									FencingToken: a.FencingToken, Node: a.Node, State: fsm.AttemptSucceeded, ExitCode: &code}))
								mu.Lock()
								finished[a.Node] = time.Now()
								left--
								if left == 0 {
									close(allDone)
								}
								mu.Unlock()
							}()
						}
					}
				}()
				p := &fsm.SubmitJobs{}
				for i := range jobs {
					p.Jobs = append(p.Jobs, fsm.NewJob{ID: fmt.Sprintf("j%02d", i), Spec: fsm.JobSpec{Command: []string{"sleep"}, Priority: 50,
						Resources: fsm.Resources{CPU: 1000, MemoryMB: 512}}})
				}
				t0 := time.Now()
				sr.Apply(ctx, mustCommand(fsm.CmdSubmitJobs, time.Now(), p))
				<-allDone
				wall := time.Since(t0)
				over = append(over, float64((wall-5*run).Microseconds())/1000/5)
				stop()
				cancel()
				<-done
				<-execDone
				wg.Wait()
				f.Close()
			}
			b.ReportMetric(median(over), "over-ideal-ms/wave")
			b.ReportMetric(median(handoffs), "handoff-p50-ms")
		})
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
