package sched

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// BenchmarkChainRelease is `foreman bench dag`'s chain without processes
// or replication: one workflow of a chain of jobs on one node; the
// executor reports each attempt running as soon as it sees it assigned
// and succeeded 1 ms later; every apply takes a 2 ms commit round. It
// reports the median release (the parent's finish applied → the child's
// placement applied and seen), which is what the scheduler adds to a
// hand-off: the wake-up, any coalescing window, the plan and the placement's
// commit round.
func BenchmarkChainRelease(b *testing.B) {
	const (
		chain  = 30
		run    = time.Millisecond
		commit = 2 * time.Millisecond
	)
	var rel []float64
	for range b.N {
		f, err := fsm.Open(filepath.Join(b.TempDir(), "state.db"), fsm.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		fr := &fakeRaft{t: b, f: f, leaderSince: time.Now().Add(-time.Hour), heard: map[string]time.Time{}}
		fr.Apply(context.Background(), mustCommand(fsm.CmdUpsertNode, time.Now(), &fsm.UpsertNode{Node: node("n1", 4000, 4096)}))
		sr := &slowRaft{fakeRaft: fr, commit: commit}
		s, err := New(DefaultConfig(), Deps{Raft: sr, State: f}, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		watch, stop := f.Watch()
		p := &fsm.SubmitWorkflow{ID: "W", Name: "chain"}
		for i := range chain {
			j := fsm.NewJob{ID: fmt.Sprintf("j%02d", i), Spec: fsm.JobSpec{Name: fmt.Sprintf("j%02d", i), Command: []string{"true"}, MaxAttempts: 1}}
			if i > 0 {
				j.Spec.DependsOn = []string{fmt.Sprintf("j%02d", i-1)}
			}
			p.Jobs = append(p.Jobs, j)
		}
		sr.Apply(ctx, mustCommand(fsm.CmdSubmitWorkflow, time.Now(), p))
		var finished time.Time
		for i := range chain {
			id := fmt.Sprintf("j%02d", i)
			var a *fsm.Attempt
			for a == nil {
				f.View(func(tx *fsm.Tx) error {
					return tx.LiveAttempts(func(x *fsm.Attempt) bool {
						if x.JobID == id && x.State == fsm.AttemptAssigned {
							c := *x
							a = &c
						}
						return true
					})
				})
				if a == nil {
					select {
					case <-watch:
					case <-time.After(5 * time.Second):
						b.Fatalf("%s never placed", id)
					}
				}
			}
			if i > 0 {
				rel = append(rel, float64(time.Since(finished).Microseconds())/1000)
			}
			sr.Apply(ctx, mustCommand(fsm.CmdReport, time.Now(), &fsm.ReportAttempt{JobID: a.JobID, Attempt: a.Num,
				FencingToken: a.FencingToken, Node: a.Node, State: fsm.AttemptRunning}))
			time.Sleep(run)
			code := 0
			sr.Apply(ctx, mustCommand(fsm.CmdReport, time.Now(), &fsm.ReportAttempt{JobID: a.JobID, Attempt: a.Num,
				FencingToken: a.FencingToken, Node: a.Node, State: fsm.AttemptSucceeded, ExitCode: &code}))
			finished = time.Now()
		}
		stop()
		cancel()
		<-done
		f.Close()
	}
	b.ReportMetric(median(rel), "release-p50-ms")
}
