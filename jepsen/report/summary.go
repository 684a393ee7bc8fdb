package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
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
	b.WriteString("| scenario | nodes | verdict | attempted | acked | indet. | lost | dup | recovered | stuck | ok/s before/during/after | success before/during/after | 1st write after fault / heal | drain | elections | failed checks |\n")
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
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d | %d | %d | %d | %d | %d | %.1f / %.1f / %.1f | %.0f%% / %.0f%% / %.0f%% | %s / %s | %s | %d | %s |\n",
			s.Scenario, s.Nodes, s.Verdict, s.Attempted, s.Acknowledged, s.Indeterminate, s.Lost, s.Duplicated, s.Recovered, s.Stuck,
			w(0).OKPerSec, w(1).OKPerSec, w(2).OKPerSec, 100*w(0).SuccessRate, 100*w(1).SuccessRate, 100*w(2).SuccessRate,
			secs(s.FirstWriteAfterFault), secs(s.FirstWriteAfterHeal), secs(s.DrainTime), s.Elections, strings.Join(failed, ", "))
	}
	if m, n := MedianRecovery(ss); n > 0 {
		fmt.Fprintf(&b, "\nMedian time to the first acknowledged write after heal: %s over %d faulted scenarios (target <= 10s).\n", secs(m), n)
	}
	return b.String()
}

// MedianRecovery is the median time to the first successful write after
// heal over the scenarios that had a fault (nemesis other than none); a
// scenario with no write after heal counts as infinitely slow. n is the
// number of scenarios counted.
func MedianRecovery(ss []Summary) (median time.Duration, n int) {
	var ds []time.Duration
	for _, s := range ss {
		if s.Nemesis == "none" || s.Verdict == "ERROR" {
			continue
		}
		d := s.FirstWriteAfterHeal
		if d < 0 {
			d = time.Duration(math.MaxInt64)
		}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	m := ds[len(ds)/2]
	if len(ds)%2 == 0 {
		a, b := ds[len(ds)/2-1], ds[len(ds)/2]
		m = a + (b-a)/2
	}
	if m == time.Duration(math.MaxInt64) {
		m = -1
	}
	return m, len(ds)
}
