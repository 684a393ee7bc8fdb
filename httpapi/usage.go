package httpapi

import (
	"cmp"
	"encoding/csv"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// UsageReport is the reply to GET /v1/usage (issue 39).
type UsageReport = api.UsageReport

// DefaultUsageSince is how far back GET /v1/usage looks without ?since=.
const DefaultUsageSince = 30 * 24 * time.Hour

var usageDays = regexp.MustCompile(`^([0-9]+)([dw])$`)

// parseUsageTime reads ?since= or ?until=: a duration back from now
// ("30d", "2w", "12h"), an RFC 3339 time or a date (YYYY-MM-DD, UTC).
func parseUsageTime(field, v string, now time.Time) (time.Time, error) {
	if m := usageDays.FindStringSubmatch(v); m != nil {
		n, err := strconv.Atoi(m[1])
		if err == nil && n <= 100000 {
			d := time.Duration(n) * 24 * time.Hour
			if m[2] == "w" {
				d *= 7
			}
			return now.Add(-d), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, invalid(field, "%q is not a duration (30d, 2w, 12h), an RFC 3339 time or a date (YYYY-MM-DD)", v)
}

// usageQuery is a parsed GET /v1/usage.
type usageQuery struct {
	since, until time.Time
	by, label    string // label: the key of by=label:KEY
	step         string
	ns           string // display name, AllNamespaces, or "" (every readable)
}

func parseUsageQuery(r *http.Request, now time.Time) (usageQuery, error) {
	qv := r.URL.Query()
	q := usageQuery{since: now.Add(-DefaultUsageSince), until: now, by: "namespace", step: "total"}
	var err error
	if v := qv.Get("since"); v != "" {
		if q.since, err = parseUsageTime("since", v, now); err != nil {
			return q, err
		}
	}
	if v := qv.Get("until"); v != "" {
		if q.until, err = parseUsageTime("until", v, now); err != nil {
			return q, err
		}
	}
	if oldest := now.Add(-fsm.UsageRetention); q.since.Before(oldest.Add(-time.Minute)) {
		return q, invalid("since", "%s is before the kept range: usage is kept %d days (since %s)",
			q.since.Format(time.RFC3339), int(fsm.UsageRetention/(24*time.Hour)), oldest.Format(time.DateOnly))
	}
	if !q.since.Before(q.until) {
		return q, invalid("since", "%s is not before until (%s)", q.since.Format(time.RFC3339), q.until.Format(time.RFC3339))
	}
	if v := qv.Get("by"); v != "" {
		switch {
		case v == "namespace" || v == "user":
			q.by = v
		case strings.HasPrefix(v, "label:") && len(v) > len("label:"):
			q.by, q.label = "label", strings.TrimPrefix(v, "label:")
		default:
			return q, invalid("by", "%q: want namespace, user or label:KEY", v)
		}
	}
	if v := qv.Get("step"); v != "" {
		if v != "hour" && v != "day" && v != "total" {
			return q, invalid("step", "%q: want hour, day or total", v)
		}
		q.step = v
	}
	if v := qv.Get("namespace"); v != "" {
		if v != AllNamespaces {
			if err := CheckNamespace("namespace", v); err != nil {
				return q, err
			}
		}
		q.ns = v
	}
	return q, nil
}

// usageReport handles GET /v1/usage: the usage records of [since, until)
// aggregated by namespace, user or one accounting label, per hour, day or
// over the whole range (records older than fsm.UsageHourlyFor are daily:
// step=hour shows them at their day's start). A token sees the
// namespaces it may read; ?namespace=* needs a grant on every namespace.
// ?format=csv (or Accept: text/csv) answers CSV.
func (s *server) usageReport(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now().UTC()
	q, err := parseUsageQuery(r, now)
	if err == nil && q.ns != "" {
		err = s.allow(r, PermRead, q.ns)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := UsageReport{Since: q.since, Until: q.until, Step: q.step, Labels: []string{}, Rows: []api.UsageRow{}}
	out.By = q.by
	if q.by == "label" {
		out.By = "label:" + q.label
	}
	if q.ns != AllNamespaces {
		out.Namespace = q.ns
	}
	type rowKey struct {
		start time.Time
		key   string
	}
	sums := map[rowKey]*fsm.Usage{}
	readable := map[string]bool{}
	err = s.state.View(func(tx *fsm.Tx) error {
		out.Labels, out.Enabled = tx.UsageStarted()
		if out.Labels == nil {
			out.Labels = []string{}
		}
		if q.by == "label" && !slices.Contains(out.Labels, q.label) {
			return invalid("by", "label %q is not one usage is split by (%q; the agents' --usage-labels)", q.label, out.Labels)
		}
		return tx.UsageRange(q.since.Truncate(24*time.Hour), q.until, func(start time.Time, ns, user, labels string, u *fsm.Usage) error {
			if q.ns != "" && q.ns != AllNamespaces && ns != q.ns {
				return nil
			}
			daily := start.Before(now.Add(-fsm.UsageHourlyFor)) && start.Equal(start.Truncate(24*time.Hour))
			if start.Before(q.since.Truncate(time.Hour)) && !daily {
				return nil // an hourly record before since (a daily one is taken whole)
			}
			ok, seen := readable[ns]
			if !seen {
				ok = s.allow(r, PermRead, ns) == nil
				readable[ns] = ok
			}
			if !ok {
				return nil
			}
			k := rowKey{key: ns}
			switch q.by {
			case "user":
				k.key = user
			case "label":
				k.key = labelValue(labels, q.label)
			}
			switch q.step {
			case "hour":
				k.start = start
			case "day":
				k.start = start.Truncate(24 * time.Hour)
			default:
				k.start = q.since
			}
			sum := sums[k]
			if sum == nil {
				sum = &fsm.Usage{}
				sums[k] = sum
			}
			sum.Add(u)
			return nil
		})
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for k, u := range sums {
		out.Rows = append(out.Rows, api.NewUsageRow(k.start, k.key, api.Usage(*u))) // the same fields
	}
	slices.SortFunc(out.Rows, func(a, b api.UsageRow) int {
		return cmp.Or(a.Start.Compare(b.Start), strings.Compare(a.Key, b.Key))
	})
	if r.URL.Query().Get("format") == "csv" || strings.Contains(r.Header.Get("Accept"), "text/csv") {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_ = WriteUsageCSV(w, out.Rows)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// labelValue is key's value in a record's labels ("k=v,k2=v2"); a folded
// record's is fsm.UsageOtherLabels.
func labelValue(labels, key string) string {
	if labels == fsm.UsageOtherLabels {
		return labels
	}
	for kv := range strings.SplitSeq(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// UsageCSVHeader is the header row of WriteUsageCSV.
var UsageCSVHeader = []string{"start", "key", "attempts", "cpu_seconds", "cpu_requested_seconds", "memory_gib_seconds",
	"memory_gib_seconds_requested", "gpu_seconds", "gpu_memory_gib_seconds", "wall_seconds", "peak_memory_bytes"}

// WriteUsageCSV writes rows as CSV with UsageCSVHeader (the API's and the
// CLI's --csv).
func WriteUsageCSV(w interface{ Write([]byte) (int, error) }, rows []api.UsageRow) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(UsageCSVHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, r := range rows {
		_ = cw.Write([]string{r.Start.UTC().Format(time.RFC3339), r.Key, strconv.FormatInt(r.Usage.Attempts, 10),
			f(r.CPUSeconds), f(r.CPURequestedSeconds), f(r.MemoryGiBSeconds), f(r.MemoryGiBSecondsRequested),
			f(r.GPUSeconds), f(r.GPUMemoryGiBSeconds), f(r.WallSeconds), strconv.FormatInt(r.Usage.PeakMemoryB, 10)})
	}
	cw.Flush()
	return cw.Error()
}
