package agent

import (
	"context"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/fsm"
)

// reportBatch is the worker's Reporter (behind exec.BatchingReporter): it
// sends the coalesced reports through raft (forwarded to the leader), one
// report as a plain CmdReport, several as one CmdReportBatch entry.
type reportBatch struct {
	n   *cluster.Node
	now func() time.Time // stamps the command (Command.At)
}

func (r reportBatch) ReportBatch(ctx context.Context, reps []fsm.ReportAttempt) ([]error, error) {
	if len(reps) == 1 {
		return []error{r.one(ctx, reps[0])}, nil
	}
	cmd, err := fsm.NewCommand(fsm.CmdReportBatch, r.now(), fsm.ReportAttempts{Reports: reps})
	if err != nil {
		return nil, err
	}
	res, err := r.n.Apply(ctx, cmd)
	if res != nil && res.Err != nil {
		// The entry as a whole was refused (it never is for refusals of
		// single reports): send them one by one so each gets its answer.
		errs := make([]error, len(reps))
		for i := range reps {
			errs[i] = r.one(ctx, reps[i])
		}
		return errs, nil
	}
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(reps))
	for i := range reps {
		errs[i] = fsm.ReportBatchItemErr(res, i)
	}
	return errs, nil
}

func (r reportBatch) one(ctx context.Context, rep fsm.ReportAttempt) error {
	cmd, err := fsm.NewCommand(fsm.CmdReport, r.now(), rep)
	if err != nil {
		return err
	}
	res, err := r.n.Apply(ctx, cmd)
	if err != nil {
		return err
	}
	return res.Err
}
