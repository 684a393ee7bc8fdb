package sched

import (
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// wakeOnce is the read-and-plan half of Scheduler.planOnce.
func wakeOnce(tb testing.TB, f *fsm.FSM, now time.Time, cfg Config) *Decision {
	tb.Helper()
	var dec *Decision
	err := f.View(func(tx *fsm.Tx) error {
		snap, err := LoadSnapshot(tx, now)
		if err != nil {
			return err
		}
		snap.LeaderSince = t0.Add(-time.Hour)
		dec = Plan(snap, now, cfg)
		return dec.Err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dec
}
