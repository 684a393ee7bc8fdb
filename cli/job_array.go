package cli

import (
	"fmt"
	"strings"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// jobStateCell is a job's state in lists; an array's shows how many of
// its tasks have ended.
func jobStateCell(j api.Job) string {
	if a := j.Array; a != nil {
		return fmt.Sprintf("%s %d/%d", j.State, a.Succeeded+a.Failed+a.Cancelled, a.Size)
	}
	return string(j.State)
}

// arrayLine is the Array: row of `job status`: the indexes and where the
// tasks are.
func arrayLine(spec *fsm.ArraySpec, s *fsm.ArrayStatus) string {
	parts := []string{fmt.Sprintf("%s, %d tasks", spec, s.Size)}
	for _, c := range []struct {
		n    int
		what string
	}{
		{s.Succeeded, "succeeded"}, {s.Failed, "failed"}, {s.Cancelled, "cancelled"},
		{s.Live - s.Queued, "running"}, {s.Queued, "queued"}, {s.Unmade(), "not made yet"},
	} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return strings.Join(parts, ", ")
}

// arrayIndexRows are the index lists of `job status` for an array.
func arrayIndexRows(d *httpapi.ArrayDetail) [][2]string {
	if d == nil {
		return nil
	}
	var rows [][2]string
	for _, r := range [][2]string{{"Failed indexes:", d.Failed}, {"Cancelled indexes:", d.Cancelled}, {"Running indexes:", d.Running}, {"Retrying indexes:", d.Retrying}} {
		if r[1] != "" {
			rows = append(rows, r)
		}
	}
	return rows
}
