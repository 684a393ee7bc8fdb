package sched

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// ensureUsage proposes fsm.StartUsage when the state's accounting is off
// or splits by other labels than Config.UsageLabels: at the loop's start,
// on each GC tick, and every RetryDelay while accounting is off. While
// some server cannot apply it (a rolling upgrade) it is refused before it
// is sent; the refusal is logged once per scheduler. It reports whether
// accounting is on with the configured labels.
func (s *Scheduler) ensureUsage(ctx context.Context, now time.Time) bool {
	want := fsm.NormalizeUsageLabels(s.cfg.UsageLabels)
	var have []string
	var on bool
	if err := s.state.View(func(tx *fsm.Tx) error {
		have, on = tx.UsageStarted()
		return nil
	}); err != nil {
		s.log.Warn("usage: state not read", "err", err)
		return false
	}
	if on && slices.Equal(have, want) {
		return true
	}
	cmd := mustCommand(fsm.CmdStartUsage, now, &fsm.StartUsage{Labels: want})
	res, err := s.raft.Apply(ctx, cmd)
	if err == nil && res != nil {
		err = res.Err
	}
	switch {
	case err == nil:
		s.log.Info("usage accounting on", "labels", want)
		return true
	case errors.Is(err, fsm.ErrFeatureHeld):
		if !s.usageHeldLogged {
			s.usageHeldLogged = true
			s.log.Info("usage accounting waits for every server to support it", "err", err)
		}
	default:
		s.log.Warn("usage: start_usage failed", "err", err)
	}
	return false
}
