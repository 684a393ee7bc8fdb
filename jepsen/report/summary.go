package report

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/jepsen/checker"
)

// Summary is one scenario's outcome.
type Summary struct {
	Scenario string `json:"scenario"`
	Nemesis  string `json:"nemesis"`
	Seed     uint64 `json:"seed"`
	Nodes    int    `json:"nodes"`
	Fault    string `json:"fault"`
	// FaultLog is the nemesis's own log (the clock nemesis: every offset).
	FaultLog []string `json:"fault_log,omitempty"`
	// ClockAhead and ClockBehind are the largest wall-clock offsets applied.
	ClockAhead  time.Duration `json:"clock_ahead_ns,omitempty"`
	ClockBehind time.Duration `json:"clock_behind_ns,omitempty"`

	Attempted     int `json:"attempted"`
	Acknowledged  int `json:"acknowledged"`
	Indeterminate int `json:"indeterminate"` // keys never resolved
	Lost          int `json:"lost"`
	Duplicated    int `json:"duplicated"`
	Recovered     int `json:"recovered"`
	Stuck         int `json:"stuck"`

	Windows              []Window      `json:"windows"`
	FirstWriteAfterFault time.Duration `json:"first_write_after_fault_ns"`
	FirstWriteAfterHeal  time.Duration `json:"first_write_after_heal_ns"`
	DrainTime            time.Duration `json:"drain_ns"`
	Elections            int           `json:"elections"`
	LeaderChanges        int           `json:"leader_changes"`

	Results []checker.Result `json:"results"`
	Harness []string         `json:"harness_errors,omitempty"`
	Verdict string           `json:"verdict"` // PASS | FAIL | ERROR
}

// Decide sets the verdict: FAIL on any checker violation, ERROR when the
// harness itself broke (no verdict on the product), PASS otherwise.
func (s *Summary) Decide() {
	switch {
	case !checker.AllValid(s.Results):
		s.Verdict = "FAIL"
	case len(s.Harness) > 0:
		s.Verdict = "ERROR"
	default:
		s.Verdict = "PASS"
	}
}

// WriteJSON saves the summary.
func (s *Summary) WriteJSON(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func secs(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// Markdown renders the summary table across scenarios.
func Markdown(ss []Summary) string {
	var b strings.Builder
	b.WriteString("| scenario | nodes | verdict | attempted | acked | indet. | lost | dup | recovered | stuck | ok/s before/during/after | success during | 1st write after fault / heal | drain | elections | failed checks |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range ss {
		var failed []string
		for _, r := range s.Results {
			if !r.Valid {
				failed = append(failed, r.Name)
			}
		}
		failed = append(failed, s.Harness...)
		w := func(i int) Window {
			if i < len(s.Windows) {
				return s.Windows[i]
			}
			return Window{}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d | %d | %d | %d | %d | %d | %.1f / %.1f / %.1f | %.0f%% | %s / %s | %s | %d | %s |\n",
			s.Scenario, s.Nodes, s.Verdict, s.Attempted, s.Acknowledged, s.Indeterminate, s.Lost, s.Duplicated, s.Recovered, s.Stuck,
			w(0).OKPerSec, w(1).OKPerSec, w(2).OKPerSec, 100*w(1).SuccessRate,
			secs(s.FirstWriteAfterFault), secs(s.FirstWriteAfterHeal), secs(s.DrainTime), s.Elections, strings.Join(failed, ", "))
	}
	return b.String()
}
