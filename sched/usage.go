package sched

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// ensureUsage proposes fsm.StartUsage when the state's accounting is off
// or splits by other labels than Config.UsageLabels: at the loop's start
// and on each GC tick. While some server cannot apply it (a rolling
// upgrade) it is refused before it is sent and tried again at the next
// tick; the refusal is logged once per leadership term.
func (s *Scheduler) ensureUsage(ctx context.Context, now time.Time) {
	want := fsm.NormalizeUsageLabels(s.cfg.UsageLabels)
	var have []string
	var on bool
	if err := s.state.View(func(tx *fsm.Tx) error {
		have, on = tx.UsageStarted()
		return nil
	}); err != nil {
		s.log.Warn("usage: state not read", "err", err)
		return
	}
	if on && slices.Equal(have, want) {
		return
	}
	cmd := mustCommand(fsm.CmdStartUsage, now, &fsm.StartUsage{Labels: want})
	res, err := s.raft.Apply(ctx, cmd)
	if err == nil && res != nil {
		err = res.Err
	}
	switch {
	case err == nil:
		s.log.Info("usage accounting on", "labels", want)
	case errors.Is(err, fsm.ErrFeatureHeld):
		if !s.usageHeldLogged {
			s.usageHeldLogged = true
			s.log.Info("usage accounting waits for every server to support it", "err", err)
		}
	default:
		s.log.Warn("usage: start_usage failed", "err", err)
	}
}
