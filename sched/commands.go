package sched

import (
	"slices"
	"strconv"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// commands turns the plan's decisions into raft commands of at most
// BatchSize items each.
func (pl *planning) commands() []*fsm.Command {
	var out []*fsm.Command
	add := func(t fsm.CommandType, payload any) {
		out = append(out, mustCommand(t, pl.now, payload))
	}
	n := pl.cfg.BatchSize
	for _, ids := range chunks(pl.failed, n) {
		add(fsm.CmdFailJobs, &fsm.FailJobs{JobIDs: ids, Reason: fsm.ReasonDeadline})
	}
	for _, ml := range pl.lost {
		add(fsm.CmdMarkLost, ml)
	}
	for _, refs := range chunks(pl.stop, n) {
		add(fsm.CmdStopAttempts, &fsm.StopAttempts{Attempts: refs, Reason: fsm.ReasonDrained})
	}
	for _, sa := range pl.preemptCommands() {
		add(fsm.CmdStopAttempts, sa)
	}
	for _, ids := range chunks(pl.released, n) {
		add(fsm.CmdRelease, &fsm.ReleaseJobs{JobIDs: ids})
	}
	for _, ps := range chunks(pl.placed, n) {
		add(fsm.CmdPlace, &fsm.Place{Placements: ps})
	}
	if len(pl.reasons) > 0 {
		ids := make([]string, 0, len(pl.reasons))
		for id := range pl.reasons {
			ids = append(ids, id)
		}
		slices.Sort(ids) // map order must not leak into the commands
		for _, part := range chunks(ids, n) {
			m := make(map[string]string, len(part))
			for _, id := range part {
				m[id] = pl.reasons[id]
			}
			add(fsm.CmdSetReasons, &fsm.SetReasons{Reasons: m})
		}
	}
	return out
}

// mustCommand wraps a payload. The payloads are plain structs of strings,
// numbers and times, which json.Marshal cannot fail on.
func mustCommand(t fsm.CommandType, at time.Time, payload any) *fsm.Command {
	c, err := fsm.NewCommand(t, at, payload)
	if err != nil {
		panic("sched: " + err.Error())
	}
	return c
}

func chunks[T any](s []T, n int) [][]T {
	var out [][]T
	for len(s) > 0 {
		k := min(n, len(s))
		out = append(out, s[:k:k])
		s = s[k:]
	}
	return out
}

func itoa(v int) string { return strconv.Itoa(v) }

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }
