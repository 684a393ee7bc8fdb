package sched

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// TestCronScale runs the cron loop over N "@every 10s" schedules on a real
// FSM (raft replaced by direct applies, the system clock) and reports fire
// lateness (the fire command's time minus its tick) and the process's CPU
// between ticks. Gated: FOREMAN_CRON_SCALE=10000 go test -run TestCronScale -v ./sched/
// All schedules share their ticks (one start_at), the worst case for a
// burst; the jobs are never placed (no nodes).
func TestCronScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FOREMAN_CRON_SCALE"))
	if n <= 0 {
		t.Skip("set FOREMAN_CRON_SCALE=<schedules> to run the cron scale test")
	}
	const every, bursts = 10 * time.Second, 3
	e := newLoopEnv(t)
	start := time.Now().Truncate(every).Add(every)
	var specs []fsm.PutSchedule
	for i := range n {
		sp := every10(fmt.Sprintf("s%05d", i), fsm.CatchUpLatest)
		sp.StartAt = &start
		specs = append(specs, fsm.PutSchedule{Schedule: sp, Create: true})
	}
	for _, p := range specs {
		e.apply(fsm.CmdPutSchedule, &p)
	}
	cfg := loopConfig()
	tr := &timedRaft{fakeRaft: e.r, done: map[*fsm.Command]time.Time{}}
	_, stop := e.startWith(cfg, Deps{Raft: tr, State: e.f, Clock: SystemClock()})
	defer stop()
	first := time.Now().Truncate(every).Add(every)
	var quiet []float64
	for b := range bursts {
		tick := first.Add(time.Duration(b) * every)
		time.Sleep(time.Until(tick.Add(2 * time.Second))) // placing the window, not synchronising
		c0, w0 := cpuNow(), time.Now()
		time.Sleep(time.Until(tick.Add(9 * time.Second)))
		c1, w1 := cpuNow(), time.Now()
		quiet = append(quiet, 100*(c1-c0).Seconds()/w1.Sub(w0).Seconds())
	}
	last := first.Add(time.Duration(bursts-1) * every)
	var late, applied []time.Duration
	for _, c := range e.r.commands(fsm.CmdFireSchedules) {
		var p fsm.FireSchedules
		if err := c.DecodePayload(&p); err != nil {
			t.Fatal(err)
		}
		for _, f := range p.Fires {
			if !f.Tick.Before(first) && !f.Tick.After(last) {
				late = append(late, c.At.Sub(f.Tick))
				applied = append(applied, tr.at(c).Sub(f.Tick))
			}
		}
	}
	if len(late) != n*bursts {
		t.Errorf("%d fires in %d ticks of %d schedules", len(late), bursts, n)
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	sort.Slice(applied, func(i, j int) bool { return applied[i] < applied[j] })
	sort.Float64s(quiet)
	t.Logf("%d schedules, %d fires: fired-at minus tick p50 %v p99 %v max %v; applied minus tick p50 %v p99 %v; CPU between ticks %.2f%% of a core (%v)",
		n, len(late), late[len(late)/2], late[len(late)*99/100], late[len(late)-1],
		applied[len(applied)/2], applied[len(applied)*99/100], quiet[len(quiet)/2], quiet)
}

// timedRaft records when each command's apply returned.
type timedRaft struct {
	*fakeRaft
	mu   sync.Mutex
	done map[*fsm.Command]time.Time
}

func (r *timedRaft) Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	res, err := r.fakeRaft.Apply(ctx, cmd)
	r.mu.Lock()
	r.done[cmd] = time.Now()
	r.mu.Unlock()
	return res, err
}

func (r *timedRaft) at(cmd *fsm.Command) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done[cmd]
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
