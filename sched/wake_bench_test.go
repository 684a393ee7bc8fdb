package sched

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// wakeState is an FSM holding `waiting` jobs whose run_at is an hour
// ahead (what `foreman bench submit` leaves behind) plus a handful of
// queued jobs, on four nodes with room for them.
func wakeState(tb testing.TB, waiting, queued int) (*fsm.FSM, *fakeRaft) {
	tb.Helper()
	f, err := fsm.Open(filepath.Join(tb.TempDir(), "state.db"), fsm.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	r := &fakeRaft{t: tb, f: f, leaderSince: t0.Add(-time.Hour), heard: map[string]time.Time{}}
	apply := func(typ fsm.CommandType, payload any) {
		cmd, err := fsm.NewCommand(typ, t0, payload)
		if err != nil {
			tb.Fatal(err)
		}
		if res, err := r.Apply(context.Background(), cmd); err != nil || res.Err != nil {
			tb.Fatalf("apply %s: %v %v", typ, err, res.Err)
		}
	}
	for i := range 4 {
		apply(fsm.CmdUpsertNode, &fsm.UpsertNode{Node: node(fmt.Sprintf("n%d", i), 8000, 16384)})
	}
	runAt := t0.Add(time.Hour)
	for i := 0; i < waiting; i += 1000 {
		p := &fsm.SubmitJobs{}
		for k := i; k < min(waiting, i+1000); k++ {
			p.Jobs = append(p.Jobs, fsm.NewJob{ID: fmt.Sprintf("01W%023d", k), Spec: fsm.JobSpec{
				Name: "bench", Command: []string{"true"}, Priority: 50, RunAt: &runAt}})
		}
		apply(fsm.CmdSubmitJobs, p)
	}
	for i := 0; i < queued; i += 1000 {
		p := &fsm.SubmitJobs{}
		for k := i; k < min(queued, i+1000); k++ {
			p.Jobs = append(p.Jobs, fsm.NewJob{ID: fmt.Sprintf("01Q%023d", k), Spec: fsm.JobSpec{
				Name: "bench", Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 100, MemoryMB: 64}}})
		}
		apply(fsm.CmdSubmitJobs, p)
	}
	return f, r
}

// BenchmarkWake measures what one wake of the leader loop costs before it
// applies anything: load the snapshot and plan, with 0 or 200,000 jobs
// waiting on a run_at an hour ahead and 10 queued jobs to place; and with
// a backlog of 100,000 queued jobs of which the four nodes take 320.
func BenchmarkWake(b *testing.B) {
	for _, tc := range []struct{ waiting, queued, placed int }{
		{0, 10, 10}, {200_000, 10, 10}, {0, 100_000, 320},
	} {
		b.Run(fmt.Sprintf("waiting=%d/queued=%d", tc.waiting, tc.queued), func(b *testing.B) {
			f, _ := wakeState(b, tc.waiting, tc.queued)
			cfg := DefaultConfig()
			b.ResetTimer()
			for b.Loop() {
				dec := wakeOnce(b, f, t0.Add(time.Second), cfg)
				if dec.Stats.Placed != tc.placed {
					b.Fatalf("placed %d, want %d", dec.Stats.Placed, tc.placed)
				}
			}
		})
	}
}

// BenchmarkWakeLive is a wake with 5,000 live attempts (zero-resource
// jobs, as `foreman bench throughput` runs) and nothing to place: what
// every report during a throughput run costs the leader.
func BenchmarkWakeLive(b *testing.B) {
	f, r := wakeState(b, 0, 0)
	for i := 0; i < 5000; i += 1000 {
		p := &fsm.SubmitJobs{}
		pl := &fsm.Place{}
		for k := i; k < i+1000; k++ {
			id := fmt.Sprintf("01L%023d", k)
			p.Jobs = append(p.Jobs, fsm.NewJob{ID: id, Spec: fsm.JobSpec{Name: "bench", Command: []string{"true"}, Priority: 50}})
			pl.Placements = append(pl.Placements, fsm.Placement{JobID: id, Node: fmt.Sprintf("n%d", k%4)})
		}
		for _, c := range []*fsm.Command{mustCommand(fsm.CmdSubmitJobs, t0, p), mustCommand(fsm.CmdPlace, t0, pl)} {
			if res, err := r.Apply(context.Background(), c); err != nil || res.Err != nil || len(res.Skipped) > 0 {
				b.Fatalf("apply %s: %v %v %v", c.Type, err, res.Err, res.Skipped)
			}
		}
	}
	cfg := DefaultConfig()
	b.ResetTimer()
	for b.Loop() {
		if dec := wakeOnce(b, f, t0.Add(time.Second), cfg); len(dec.Commands) != 0 {
			b.Fatalf("%d commands, want none", len(dec.Commands))
		}
	}
}
