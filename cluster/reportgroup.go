package cluster

import (
	"context"
	"strconv"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/groupcommit"
	"github.com/foreman-sched/foreman/wallclock"
)

// reportGroup merges the attempt reports that clients send through this
// server into shared raft entries (issue 35). Every client's request used
// to be an entry of its own and, on a follower, a forward of its own to the
// leader: with 5,000 simulated clients finishing 1,000 jobs/s a follower
// held 400+ forwards open at once, and each entry cost a decode, an apply
// and a log record on every server whatever it carried.
//
// The same queue as the submits' group commit (package groupcommit): at
// most reportGroupsInFlight entries are committing at once, each of up to
// maxClientReports reports; a request that finds a slot free goes at once,
// alone, the others go together in the next group.
//
// A group is one fsm.CmdReportBatch, which already applies and refuses each
// report on its own, so merging the reports of several clients changes no
// report's outcome: each member gets its reports' outcomes back, indexed as
// it sent them. An entry refused as a whole (which a single report's
// refusal never causes) is applied again member by member, so each gets the
// answer it would have had alone.
type reportGroup struct {
	apply func(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error)
	queue *groupcommit.Queue[*pendingReports]
}

// reportGroupsInFlight is how many report entries one server has in raft
// (or in a forward to the leader) at once: like the worker's reporter
// (exec.BatchingReporter), two keep raft busy while the next group fills.
const reportGroupsInFlight = 2

// pendingReports is one client request's reports waiting for their group.
type pendingReports struct {
	reports []fsm.ReportAttempt
	done    chan struct{} // closed when res/err are set
	res     *fsm.Result
	err     error
}

func newReportGroup(apply func(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error)) *reportGroup {
	g := &reportGroup{apply: apply}
	size := func(p *pendingReports) int { return len(p.reports) }
	g.queue = groupcommit.New(reportGroupsInFlight, maxClientReports, size, g.commitAndRelease)
	return g
}

// commit applies one request's reports in some group and returns what
// applying them alone would have: for one report, CmdReport's result and
// refusal; for several, a CmdReportBatch result whose Skipped is indexed
// by the request's own order. A request whose client goes away stops
// waiting; its group goes on and may apply its reports.
func (g *reportGroup) commit(ctx context.Context, reports []fsm.ReportAttempt) (*fsm.Result, error) {
	p := &pendingReports{reports: reports, done: make(chan struct{})}
	g.queue.Add(p)
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// commitAndRelease commits a group and wakes its members.
func (g *reportGroup) commitAndRelease(group []*pendingReports) {
	g.commitGroup(group)
	for _, p := range group {
		close(p.done)
	}
}

// commitGroup applies a group as one entry and hands every member its
// outcome. The entry is not tied to any member's request: one client
// hanging up must not fail the others (Apply bounds it by ForwardTimeout).
func (g *reportGroup) commitGroup(group []*pendingReports) {
	if len(group) == 1 {
		g.commitAlone(group[0])
		return
	}
	var all fsm.ReportAttempts
	for _, p := range group {
		all.Reports = append(all.Reports, p.reports...)
	}
	res, err := g.applyReports(all.Reports)
	switch {
	case res != nil && err != nil:
		// Refused as a whole, so it changed nothing: each member alone.
		for _, p := range group {
			g.commitAlone(p)
		}
		return
	case err != nil:
		for _, p := range group {
			p.err = err
		}
		return
	}
	off := 0
	for _, p := range group {
		p.res, p.err = memberResult(res, off, len(p.reports))
		off += len(p.reports)
	}
}

// commitAlone applies one member's reports as an entry of their own.
func (g *reportGroup) commitAlone(p *pendingReports) {
	p.res, p.err = g.applyReports(p.reports)
}

// applyReports commits reports as the entry a lone request always made:
// CmdReport for one, CmdReportBatch for several.
func (g *reportGroup) applyReports(reports []fsm.ReportAttempt) (*fsm.Result, error) {
	var cmd *fsm.Command
	var err error
	if len(reports) == 1 {
		cmd, err = fsm.NewCommand(fsm.CmdReport, wallclock.Now(), reports[0])
	} else {
		cmd, err = fsm.NewCommand(fsm.CmdReportBatch, wallclock.Now(), fsm.ReportAttempts{Reports: reports})
	}
	if err != nil {
		return nil, err
	}
	return g.apply(context.Background(), cmd)
}

// memberResult is the share of a group's CmdReportBatch result that
// belongs to the member whose reports are [off, off+k) of the entry, as
// the member's own entry would have answered: CmdReport's refusal for one
// report, the batch's Skipped re-indexed from 0 for several.
func memberResult(res *fsm.Result, off, k int) (*fsm.Result, error) {
	out := &fsm.Result{Index: res.Index}
	if k == 1 {
		err := fsm.ReportBatchItemErr(res, off)
		out.Err = err
		return out, err
	}
	for i := range k {
		if s, ok := res.Skipped[strconv.Itoa(off+i)]; ok {
			if out.Skipped == nil {
				out.Skipped = map[string]string{}
			}
			out.Skipped[strconv.Itoa(i)] = s
		}
	}
	return out, nil
}

// queued is the number of requests waiting for a group (tests).
func (g *reportGroup) queued() int { return g.queue.Queued() }
