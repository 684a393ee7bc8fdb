package report

import (
	"time"

	"github.com/foreman-sched/foreman/jepsen/history"
)

// Window is availability over one phase of a scenario.
type Window struct {
	Name        string  `json:"name"`
	Seconds     float64 `json:"seconds"`
	Attempted   int     `json:"attempted"`
	OK          int     `json:"ok"`
	Info        int     `json:"info"`
	Fail        int     `json:"fail"`
	SuccessRate float64 `json:"success_rate"`
	OKPerSec    float64 `json:"ok_per_sec"`
}

// Windows splits ops (by invocation time) into before / during / after
// the fault [faultStart, healAt) and ending at end, when the harness
// stopped the traffic. An indeterminate op that returned at or after end
// was cut short by the harness itself and is left out.
func Windows(ops []history.Op, faultStart, healAt, end int64) []Window {
	ws := []Window{{Name: "before"}, {Name: "during"}, {Name: "after"}}
	bounds := [][2]int64{{0, faultStart}, {faultStart, healAt}, {healAt, end}}
	for _, op := range ops {
		if op.Outcome == history.Info && op.Return >= end {
			continue
		}
		for i, b := range bounds {
			if op.Call >= b[0] && op.Call < b[1] {
				w := &ws[i]
				w.Attempted++
				switch op.Outcome {
				case history.OK:
					w.OK++
				case history.Info:
					w.Info++
				default:
					w.Fail++
				}
			}
		}
	}
	for i, b := range bounds {
		w := &ws[i]
		w.Seconds = time.Duration(b[1] - b[0]).Seconds()
		if w.Attempted > 0 {
			w.SuccessRate = float64(w.OK) / float64(w.Attempted)
		}
		if w.Seconds > 0 {
			w.OKPerSec = float64(w.OK) / w.Seconds
		}
	}
	return ws
}

// FirstWrite is the time from t to the completion of the first successful
// submit invoked at or after t, or -1 when there was none.
func FirstWrite(ops []history.Op, t int64) time.Duration {
	best := int64(-1)
	for _, op := range ops {
		if op.Kind == history.Submit && op.Outcome == history.OK && op.Call >= t && (best < 0 || op.Return < best) {
			best = op.Return
		}
	}
	if best < 0 {
		return -1
	}
	return time.Duration(best - t)
}

// LeaderSample is what one node said about the leader at one time.
type LeaderSample struct {
	At     int64  `json:"at"`
	Node   string `json:"node"`
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
}

// Elections counts term changes seen by any node (a new term is an
// election, won or not) and changes of the leader named by the samples
// over time.
func Elections(samples []LeaderSample) (terms, leaderChanges int) {
	seen := map[uint64]bool{}
	last := ""
	for _, s := range samples {
		if s.Term > 0 {
			seen[s.Term] = true
		}
		if s.Leader != "" && s.Leader != last {
			if last != "" {
				leaderChanges++
			}
			last = s.Leader
		}
	}
	if len(seen) > 0 {
		terms = len(seen) - 1
	}
	return terms, leaderChanges
}
