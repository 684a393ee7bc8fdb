package checker

import (
	"strings"
	"testing"
	"time"
)

func TestDAGChecker(t *testing.T) {
	recs := func(lines ...string) []Record { return parseRecordLines(t, lines...) }
	diamond := []DAGJob{
		{ID: "a", Name: "a", State: "succeeded"},
		{ID: "b", Name: "b", State: "failed", Parents: []string{"a"}},
		{ID: "c", Name: "c", State: "succeeded", Parents: []string{"a"}},
		{ID: "d", Name: "d", State: "skipped", Parents: []string{"b", "c"}},
		{ID: "e", Name: "e", State: "succeeded", Parents: []string{"b", "c"}, Condition: "failure"},
		{ID: "f", Name: "f", State: "succeeded", Parents: []string{"d"}, Condition: "always"},
	}
	good := []string{
		"start a 1 5 n1 100", "end a 1 5 n1 200",
		"start b 1 6 n2 210", "end b 1 6 n2 300",
		"start c 1 7 n3 220", "end c 1 7 n3 400",
		"start e 1 8 n1 310", "end e 1 8 n1 320",
		"start f 1 9 n1 410", "end f 1 9 n1 420", // its parent d was skipped: no run, no bound
	}
	tests := []struct {
		name  string
		lines []string
		want  string // "" = valid
	}{
		{"ok", good, ""},
		{"child before parent", append(good[2:], "start a 1 5 n1 100", "end a 1 5 n1 250"), "started"},
		{"skipped ran", append(good, "start d 1 9 n2 500"), "is skipped but started"},
		{"failure child before the failure", append(append([]string{}, good[:6]...), "start e 1 8 n1 290"), "before its parents' deciding finish"},
	}
	for _, tc := range tests {
		r := DAG(recs(tc.lines...), diamond, time.Nanosecond)
		if tc.want == "" && !r.Valid || tc.want != "" && (r.Valid || !strings.Contains(strings.Join(r.Errors, "\n"), tc.want)) {
			t.Errorf("%s: valid=%v errors=%v, want %q", tc.name, r.Valid, r.Errors, tc.want)
		}
	}
}

func TestDAGCheckerAfter(t *testing.T) {
	recs := func(lines ...string) []Record { return parseRecordLines(t, lines...) }
	parents := []DAGJob{
		{ID: "a", Name: "a", State: "succeeded"},
		{ID: "b", Name: "b", State: "failed"},
	}
	base := []string{"start a 1 5 n1 100", "end a 1 5 n1 200", "start b 1 6 n2 100", "end b 1 6 n2 300"}
	after := func(state string, on ...string) []DAGJob {
		j := DAGJob{ID: "x", Name: "x", State: state, Parents: []string{"a", "b"}, After: map[string]string{"a": on[0], "b": on[1]}}
		return append(append([]DAGJob{}, parents...), j)
	}
	tests := []struct {
		name  string
		jobs  []DAGJob
		lines []string
		want  string // "" = valid
	}{
		{"met, ran after both", after("succeeded", "ok", "failed"), append(base, "start x 1 9 n1 310", "end x 1 9 n1 320"), ""},
		{"broken, cancelled", after("cancelled", "ok", "ok"), base, ""},
		{"any", after("succeeded", "any", "any"), append(base, "start x 1 9 n1 310", "end x 1 9 n1 320"), ""},
		{"ran before a parent ended", after("succeeded", "ok", "failed"), append(base, "start x 1 9 n1 250"), "before its parent's finish"},
		{"ran though broken", after("succeeded", "ok", "ok"), append(base, "start x 1 9 n1 310"), "was not met"},
		{"broken but not cancelled", after("succeeded", "ok", "cancelled"), base, "want cancelled"},
		{"met but cancelled", after("cancelled", "any", "failed"), base, "every requirement was met"},
		{"met but still waiting", after("waiting", "ok", "any"), base, "every requirement was met"},
	}
	for _, tc := range tests {
		r := DAG(recs(tc.lines...), tc.jobs, time.Nanosecond)
		if tc.want == "" && !r.Valid || tc.want != "" && (r.Valid || !strings.Contains(strings.Join(r.Errors, "\n"), tc.want)) {
			t.Errorf("%s: valid=%v errors=%v, want %q", tc.name, r.Valid, r.Errors, tc.want)
		}
	}
}

func parseRecordLines(t *testing.T, lines ...string) []Record {
	t.Helper()
	out, _, err := ParseRecords(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDAGCheckerArray(t *testing.T) {
	recs := func(lines ...string) []Record { return parseRecordLines(t, lines...) }
	tasks := func(states ...string) []DAGTask {
		var out []DAGTask
		for i, s := range states {
			out = append(out, DAGTask{ID: "A." + string(rune('0'+i)), Index: i, State: s})
		}
		return out
	}
	jobs := func(state string, ts []DAGTask, childState string) []DAGJob {
		return []DAGJob{
			{ID: "A", Name: "arr", State: state, Array: &DAGArray{Size: 3, Parallel: 2, Tasks: ts}},
			{ID: "c", Name: "c", State: childState, Parents: []string{"A"}},
		}
	}
	good := []string{
		"start A.0 1 5 n1 100", "start A.1 1 6 n2 110", "end A.0 1 5 n1 200",
		"start A.2 1 7 n3 210", "end A.1 1 6 n2 220", "end A.2 1 7 n3 300",
		"start c 1 8 n1 310", "end c 1 8 n1 320",
	}
	ok := tasks("succeeded", "succeeded", "succeeded")
	tests := []struct {
		name  string
		jobs  []DAGJob
		lines []string
		want  string // "" = valid
	}{
		{"ok", jobs("succeeded", ok, "succeeded"), good, ""},
		{"child before the last task", jobs("succeeded", ok, "succeeded"), append(append([]string{}, good[:6]...), "start c 1 8 n1 250"), "before its parents' deciding finish"},
		{"over the bound", jobs("succeeded", ok, "succeeded"), append([]string{"start A.2 2 9 n3 150", "end A.2 2 9 n3 205"}, good...), "3 tasks ran at once"},
		{"succeeded with a failed task", jobs("succeeded", tasks("succeeded", "failed", "succeeded"), "succeeded"), good, "succeeded with 2 of 3"},
		{"failed without a failed task", jobs("failed", ok, "skipped"), good[:6], "no task failed"},
		{"a missing index", jobs("succeeded", ok[:2], "succeeded"), good, "succeeded with 2 of 3"},
		{"an index twice", jobs("running", append(append([]DAGTask{}, ok[:2]...), DAGTask{ID: "A.x", Index: 1, State: "queued"}), "waiting"), good[:6], "index 1 made twice"},
		{"succeeded without running", jobs("running", ok, "waiting"), good[:3], "succeeded without an end record"},
	}
	for _, tc := range tests {
		r := DAG(recs(tc.lines...), tc.jobs, time.Nanosecond)
		if tc.want == "" && !r.Valid || tc.want != "" && (r.Valid || !strings.Contains(strings.Join(r.Errors, "\n"), tc.want)) {
			t.Errorf("%s: valid=%v errors=%v, want %q", tc.name, r.Valid, r.Errors, tc.want)
		}
	}
}
