package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/fsm"
)

// groupFSM is a real state machine that the report group's entries are
// applied to in order, as raft would, recording each entry's command.
type groupFSM struct {
	t    *testing.T
	f    *fsm.FSM
	mu   sync.Mutex
	idx  uint64
	cmds []*fsm.Command
	// hold, while open, holds every apply; held counts those waiting.
	hold chan struct{}
	held int
	// refuse refuses an entry as a whole before it is applied (an entry
	// of the group that real reports cannot make: see commitGroup).
	refuse func(c *fsm.Command) bool
}

func newGroupFSM(t *testing.T) *groupFSM {
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &groupFSM{t: t, f: f}
}

func (g *groupFSM) apply(_ context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	g.mu.Lock()
	if hold := g.hold; hold != nil {
		g.held++
		g.mu.Unlock()
		<-hold
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	g.cmds = append(g.cmds, cmd)
	if g.refuse != nil && g.refuse(cmd) {
		err := fmt.Errorf("%w: refused as a whole (test)", fsm.ErrConflict)
		return &fsm.Result{Err: err}, err
	}
	body, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	g.idx++
	res := g.f.Apply(&raft.Log{Index: g.idx, Term: 1, Type: raft.LogCommand, Data: body}).(*fsm.Result)
	return res, res.Err
}

// must applies a setup command and returns its index.
func (g *groupFSM) must(typ fsm.CommandType, payload any) uint64 {
	g.t.Helper()
	cmd, err := fsm.NewCommand(typ, time.Now(), payload)
	if err != nil {
		g.t.Fatal(err)
	}
	res, err := g.apply(context.Background(), cmd)
	if err != nil || len(res.Skipped) > 0 {
		g.t.Fatalf("setup %s: %v %v", typ, err, res.Skipped)
	}
	return res.Index
}

func (g *groupFSM) entries() []*fsm.Command {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*fsm.Command(nil), g.cmds...)
}

// placed sets up two clients with jobs a and b on c1 and c on c2, and
// returns the place entry's index (every attempt's fencing token).
func (g *groupFSM) placed() (token uint64) {
	for _, n := range []string{"c1", "c2"} {
		g.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: n, Role: fsm.RoleClient,
			Capacity: fsm.Resources{CPU: 4000, MemoryMB: 4096}}})
	}
	jobs := fsm.SubmitJobs{}
	for _, id := range []string{"01JA0000000000000000000000", "01JB0000000000000000000000", "01JC0000000000000000000000"} {
		jobs.Jobs = append(jobs.Jobs, fsm.NewJob{ID: id, Spec: fsm.JobSpec{Name: "r", Command: []string{"true"}}})
	}
	g.must(fsm.CmdSubmitJobs, jobs)
	return g.must(fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{
		{JobID: jobs.Jobs[0].ID, Node: "c1"}, {JobID: jobs.Jobs[1].ID, Node: "c1"}, {JobID: jobs.Jobs[2].ID, Node: "c2"}}})
}

const (
	jobA = "01JA0000000000000000000000"
	jobB = "01JB0000000000000000000000"
	jobC = "01JC0000000000000000000000"
)

func running(job, node string, token uint64) fsm.ReportAttempt {
	return fsm.ReportAttempt{JobID: job, Attempt: 1, FencingToken: token, Node: node,
		State: fsm.AttemptRunning, StartedAt: time.Now()}
}

type groupAnswer struct {
	res *fsm.Result
	err error
}

// staged holds the applies, sends r0 and r1 (one per runner, both held in
// the apply) and then the others, which queue behind them, and returns
// every request's answer channel. Closing g.hold releases them: the first
// runner free takes everything queued as one group.
func staged(t *testing.T, g *groupFSM, rg *reportGroup, ctxs []context.Context, reqs ...[]fsm.ReportAttempt) []chan groupAnswer {
	t.Helper()
	g.mu.Lock()
	g.hold = make(chan struct{})
	g.mu.Unlock()
	out := make([]chan groupAnswer, len(reqs))
	for i, r := range reqs {
		out[i] = make(chan groupAnswer, 1)
		go func() {
			res, err := rg.commit(ctxs[i], r)
			out[i] <- groupAnswer{res, err}
		}()
		if i < reportGroupsInFlight {
			waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.held == i+1 }, "the runners' applies held")
		} else {
			waitFor(t, func() bool { return rg.queued() == i+1-reportGroupsInFlight }, "requests queued")
		}
	}
	return out
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition, not timing it
	}
}

func background(n int) []context.Context {
	out := make([]context.Context, n)
	for i := range out {
		out[i] = context.Background()
	}
	return out
}

func attemptState(t *testing.T, f *fsm.FSM, job string) fsm.AttemptState {
	t.Helper()
	var state fsm.AttemptState
	if err := f.View(func(tx *fsm.Tx) error {
		a, err := tx.Attempt(job, 1)
		if err == nil {
			state = a.State
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return state
}

// The reports of requests waiting together share one entry, and every
// request gets exactly its own reports' outcomes, indexed as it sent them.
func TestReportGroupSharesEntriesKeepsOutcomes(t *testing.T) {
	g := newGroupFSM(t)
	token := g.placed()
	setup := len(g.entries())
	rg := newReportGroup(g.apply)
	ans := staged(t, g, rg, background(4),
		[]fsm.ReportAttempt{running(jobA, "c1", token)},
		[]fsm.ReportAttempt{running(jobB, "c1", token)},
		// These two wait together: a stale report alone, then a good
		// one and a stale one (its reports are 1 and 2 of the entry).
		[]fsm.ReportAttempt{running(jobC, "c2", token-1)},
		[]fsm.ReportAttempt{running(jobC, "c2", token), running(jobA, "c1", token+100)},
	)
	close(g.hold)
	r0, r1, r2, r3 := <-ans[0], <-ans[1], <-ans[2], <-ans[3]
	for i, r := range []groupAnswer{r0, r1} {
		if r.err != nil || len(r.res.Skipped) != 0 {
			t.Errorf("r%d: %v %v, want applied", i, r.res, r.err)
		}
	}
	if r2.res == nil || !errors.Is(r2.err, fsm.ErrStaleToken) || !errors.Is(r2.res.Err, fsm.ErrStaleToken) {
		t.Errorf("r2: %v %v, want a result refused with a stale token, as CmdReport alone answers", r2.res, r2.err)
	}
	if r3.err != nil {
		t.Fatalf("r3: %v", r3.err)
	}
	if len(r3.res.Skipped) != 1 || fsm.ReportBatchItemErr(r3.res, 0) != nil || !errors.Is(fsm.ReportBatchItemErr(r3.res, 1), fsm.ErrStaleToken) {
		t.Errorf("r3 skipped %v, want only its report 1, stale", r3.res.Skipped)
	}
	// r0's and r1's entries, then the shared one, in either order (the
	// two runners were released together).
	if got := entryShapes(g.entries()[setup:]); !slices.Equal(sorted(got), []string{"report/1", "report/1", "report_batch/3"}) {
		t.Errorf("entries %v for 4 requests, want r0's and r1's alone and one report_batch of r2's and r3's 3 reports", got)
	}
	for _, id := range []string{jobA, jobB, jobC} {
		if s := attemptState(t, g.f, id); s != fsm.AttemptRunning {
			t.Errorf("job %s attempt 1 is %s, want running", id, s)
		}
	}
}

// An entry refused as a whole is applied again member by member, so each
// request gets the answer it would have had alone; a request whose client
// went away meanwhile is applied all the same.
func TestReportGroupRefusedWholeGoesMemberByMember(t *testing.T) {
	g := newGroupFSM(t)
	token := g.placed()
	setup := len(g.entries())
	g.refuse = func(c *fsm.Command) bool {
		var p fsm.ReportAttempts
		return c.Type == fsm.CmdReportBatch && c.DecodePayload(&p) == nil && len(p.Reports) == 3
	}
	rg := newReportGroup(g.apply)
	gone, hangUp := context.WithCancel(context.Background())
	ctxs := append(background(2), gone, context.Background())
	ans := staged(t, g, rg, ctxs,
		[]fsm.ReportAttempt{running(jobA, "c1", token)},
		[]fsm.ReportAttempt{running(jobB, "c1", token)},
		[]fsm.ReportAttempt{running(jobC, "c2", token), running(jobA, "c1", token+7)},
		[]fsm.ReportAttempt{running(jobC, "c2", token-1)},
	)
	hangUp()
	if r2 := <-ans[2]; !errors.Is(r2.err, context.Canceled) {
		t.Errorf("r2 (client gone): %v, want context.Canceled", r2.err)
	}
	close(g.hold)
	<-ans[0]
	<-ans[1]
	if r3 := <-ans[3]; r3.res == nil || !errors.Is(r3.err, fsm.ErrStaleToken) {
		t.Errorf("r3: %v %v, want its own stale-token refusal", r3.res, r3.err)
	}
	waitFor(t, func() bool { return attemptState(t, g.f, jobC) == fsm.AttemptRunning }, "r2's report applied")
	got := entryShapes(g.entries()[setup:])
	if !slices.Equal(sorted(got), []string{"report/1", "report/1", "report/1", "report_batch/2", "report_batch/3"}) {
		t.Fatalf("entries %v, want r0's, r1's, the group's (refused), then r2's and r3's alone", got)
	}
	if i, j := slices.Index(got, "report_batch/3"), slices.Index(got, "report_batch/2"); i > j {
		t.Errorf("entries %v: r2's own entry before the group's refusal", got)
	}
}

// entryShapes names each entry "<type>/<reports>".
func entryShapes(cmds []*fsm.Command) []string {
	var out []string
	for _, c := range cmds {
		n := 1
		if c.Type == fsm.CmdReportBatch {
			var p fsm.ReportAttempts
			_ = c.DecodePayload(&p)
			n = len(p.Reports)
		}
		out = append(out, fmt.Sprintf("%s/%d", c.Type, n))
	}
	return out
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
