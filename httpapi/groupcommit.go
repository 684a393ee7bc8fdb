package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/groupcommit"
)

// groupCommit merges concurrent submits on the leader into shared raft
// entries. Each entry costs a log write, a replication round, an fsync on
// every voter, a decode and an apply transaction on every node, whatever it
// carries; with many clients those per-entry costs, not the jobs, were the
// price of a submit.
//
// The queue (package groupcommit) holds at most Config.SubmitGroupInflight
// groups in raft at once, each of up to Config.SubmitGroupJobs jobs: a
// submit that finds a slot free is sent at once, alone; the others wait
// and go together in the next group, so groups grow only as much as the
// load makes requests wait anyway, without a timer.
//
// A group of one submit is a plain fsm.CmdSubmitJobs entry; of several, an
// fsm.CmdSubmitGroup in which every member keeps its own outcome (its
// idempotency dedup, its refusal), so one client's bad submit never fails
// another's, and a batch stays all-or-nothing.
type groupCommit struct {
	s     *server
	queue *groupcommit.Queue[*pendingSubmit]
}

func newGroupCommit(s *server) *groupCommit {
	g := &groupCommit{s: s}
	jobs := func(p *pendingSubmit) int { return len(p.jobs) }
	g.queue = groupcommit.New(s.cfg.SubmitGroupInflight, s.cfg.SubmitGroupJobs, jobs, g.commit)
	return g
}

// pendingSubmit is one request's submit waiting for its group.
type pendingSubmit struct {
	jobs      []fsm.NewJob
	batch     bool // the body was {"jobs": [...]} (field names in errors)
	forwarded bool // a follower forwarded it here: never forward it again
	// reqID is the client's X-Request-ID (requestid.go): the group's log
	// lines name every member's, so each client's request can be followed
	// into the raft entry it shared, on the follower and on the leader.
	reqID string

	done chan struct{} // closed when res/err are set
	res  []fsm.SubmitResult
	err  error
	node string // the leader that answered, when this node forwarded it
}

// submit commits jobs (one request's, all or nothing) in some group and
// returns one result per job, in order, and the node that committed them
// (empty: this one). The jobs get their IDs in the group.
func (g *groupCommit) submit(ctx context.Context, jobs []fsm.NewJob, batch bool) ([]fsm.SubmitResult, string, error) {
	p := &pendingSubmit{jobs: jobs, batch: batch, reqID: RequestIDFrom(ctx), done: make(chan struct{})}
	if len(jobs) >= soloJobs {
		// A big batch already shares its entry's costs among its jobs;
		// waiting for a slot would only stop raft from pipelining
		// concurrent batches (measured: 3-14% fewer jobs/s for 4 clients
		// sending 1,000-job batches).
		g.commit([]*pendingSubmit{p})
		return p.res, p.node, p.err
	}
	g.queue.Add(p)
	select {
	case <-p.done:
		return p.res, p.node, p.err
	case <-ctx.Done():
		// The client is gone; the group goes on and may commit its jobs.
		return nil, "", ctx.Err()
	}
}

// soloJobs is the size from which a submit is committed at once, on its
// own, instead of queueing for a group.
const soloJobs = 100

// commit applies a group through raft on the leader, or forwards it to
// the leader from a follower. The queue's runners call it.
func (g *groupCommit) commit(group []*pendingSubmit) {
	if g.s.cluster.IsLeader() {
		g.apply(group)
	} else {
		g.forward(group)
	}
}

// queued is the number of submits waiting for a group (tests).
func (g *groupCommit) queued() int { return g.queue.Queued() }

// apply commits one group and hands every member its outcome.
func (g *groupCommit) apply(group []*pendingSubmit) {
	defer func() {
		g.logOutcomes(group)
		for _, p := range group {
			close(p.done)
		}
	}()
	// Placeability is checked here, once per group, against the nodes as
	// they are now (after the request arrived), not once per request.
	limits, err := g.s.capacityLimits()
	if err != nil {
		for _, p := range group {
			p.err = err
		}
		return
	}
	members := group[:0:0]
	gate := g.s.cluster.FeatureGate()
	for _, p := range group {
		if p.err = limits.check(p.jobs, p.batch); p.err == nil {
			p.err = gate.Check(fsm.JobsNeed(p.jobs))
		}
		if p.err == nil {
			members = append(members, p)
		}
	}
	if len(members) == 0 {
		return
	}
	// IDs are minted in group order, so they sort in commit order.
	for _, p := range members {
		for i := range p.jobs {
			p.jobs[i].ID = g.s.ids.NewID()
		}
	}
	if len(members) == 1 {
		g.applyOne(members[0])
		return
	}
	payload := fsm.SubmitGroup{Submits: make([]fsm.SubmitJobs, len(members))}
	for i, p := range members {
		payload.Submits[i].Jobs = p.jobs
	}
	res, err := g.s.apply(context.Background(), fsm.CmdSubmitGroup, payload)
	switch {
	case res != nil && res.Err != nil:
		// The entry as a whole was refused, so it changed nothing (it never
		// is for one member's refusal): each member goes alone, to get the
		// answer it would have had without the group.
		for _, p := range members {
			g.applyOne(p)
		}
		return
	case err != nil:
		for _, p := range members {
			p.err = err
		}
		return
	case len(res.Submits) != len(members):
		err := fmt.Errorf("submit: %d submits applied as %d results", len(members), len(res.Submits))
		for _, p := range members {
			p.err = err
		}
		return
	}
	for i, p := range members {
		m := res.Submits[i]
		if p.err = m.Err(); p.err == nil {
			p.res, p.err = checkResults(p.jobs, m.Jobs)
		}
	}
}

// applyOne commits one member as a plain SubmitJobs entry.
func (g *groupCommit) applyOne(p *pendingSubmit) {
	res, err := g.s.apply(context.Background(), fsm.CmdSubmitJobs, fsm.SubmitJobs{Jobs: p.jobs})
	if err != nil {
		p.err = err
		return
	}
	p.res, p.err = checkResults(p.jobs, res.Jobs)
}

// logOutcomes logs a committed group at debug level with every member's
// request ID, and each member that failed for a reason of the node's (5xx)
// on its own, with its request ID, as writeError logs a request's.
func (g *groupCommit) logOutcomes(group []*pendingSubmit) {
	log := g.s.log
	ids, jobs := make([]string, 0, len(group)), 0
	for _, p := range group {
		if p.err == nil {
			ids = append(ids, p.reqID)
			jobs += len(p.jobs)
			continue
		}
		status, _ := statusFor(p.err)
		var re *remoteError
		if errors.As(p.err, &re) {
			status = re.status
		}
		ctx := withRequestID(context.Background(), p.reqID)
		if status >= 500 {
			log.WarnContext(ctx, "grouped submit failed", "status", status, "forwarded", p.forwarded, "err", p.err)
		} else {
			log.DebugContext(ctx, "grouped submit refused", "status", status, "forwarded", p.forwarded, "err", p.err)
		}
	}
	if len(ids) > 0 && log.Enabled(context.Background(), slog.LevelDebug) {
		log.Debug("submits committed", "request_ids", ids, "jobs", jobs, "group", len(group))
	}
}

func checkResults(jobs []fsm.NewJob, res []fsm.SubmitResult) ([]fsm.SubmitResult, error) {
	if len(res) != len(jobs) {
		return nil, fmt.Errorf("submit: %d jobs applied as %d results", len(jobs), len(res))
	}
	return res, nil
}
