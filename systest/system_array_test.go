package systest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// `foreman submit --array` on real agents, through a follower: every index
// runs once as a job of its own with its index in its environment, at most
// %PARALLEL at once; a failed index shows in job status, and retrying just
// it ends the array succeeded; cancelling indexes and then the array stops
// what runs and makes nothing more; bad input is refused with one line and
// stores nothing.
func TestSystemArray(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	bin := foremanBin(t)
	c := newSysCluster(t, 3)
	leader, via := c.leader(), c.followers()[0]
	cli := cliAt(t, bin, via.url(""))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fail-13"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Each task writes its index to a file named after it, with when it
	// ran; index 13 fails while fail-13 exists.
	script := fmt.Sprintf(`d=%s; i=$FOREMAN_ARRAY_INDEX; echo "$i $FOREMAN_ARRAY_SIZE $FOREMAN_ARRAY_ID" > $d/out-$i; echo "index $i"; [ ! -e $d/fail-$i ]`, dir)
	id, err := cli("submit", "--array", "0-39%4", "--max-attempts", "1", "--name", "sys-array", "--", "sh", "-c", script)
	if err != nil {
		t.Fatalf("submit --array: %v: %s", err, id)
	}
	arr := waitJobState(t, leader, id, "failed")
	if arr.Job.Reason != "1 of 40 tasks failed" || len(arr.Attempts) != 0 {
		t.Fatalf("the array: %v; want failed with reason %q and no attempt of its own", arr, "1 of 40 tasks failed")
	}
	for i := 0; i < 40; i++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out-%d", i)))
		if want := fmt.Sprintf("%d 40 %s\n", i, id); err != nil || string(b) != want {
			t.Fatalf("index %d wrote %q (%v), want %q", i, b, err, want)
		}
	}
	tasks := listTasks(t, leader, id)
	if len(tasks) != 40 {
		t.Fatalf("%d tasks listed, want 40", len(tasks))
	}
	if n := maxOverlap(t, leader, tasks); n > 4 || n < 2 {
		t.Fatalf("at most %d tasks ran at once; want between 2 and the bound 4", n)
	}
	out, err := cli("job", "status", id)
	if words := strings.Join(strings.Fields(out), " "); err != nil || !strings.Contains(words, "40 tasks, 39 succeeded, 1 failed") || !strings.Contains(words, "Failed indexes: 13") {
		t.Fatalf("job status %s: %v\n%s", id, err, out)
	}
	if out, err := cli("logs", id, "--index", "7"); err != nil || out != "index 7" {
		t.Fatalf("logs --index 7: %v: %q", err, out)
	}
	if err := os.Remove(filepath.Join(dir, "fail-13")); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("job", "retry", id, "--indexes", "13"); err != nil {
		t.Fatalf("retry --indexes 13: %v: %s", err, out)
	}
	waitJobState(t, leader, id, "succeeded")
	if j, err := getJob(leader, id+".13"); err != nil || len(j.Attempts) != 2 {
		t.Fatalf("index 13 after its retry: %v %v; want 2 attempts", j, err)
	}

	// Cancelling: the named indexes, then the array; what runs is killed.
	d := newJobDir(t, t.TempDir())
	spec := d.waitingJob("sys-array-cancel")
	spec["array"] = "0-99%3"
	long := submitJob(t, leader, spec)
	eventually(t, systemTimeout, "3 tasks running", func() error {
		if n := len(listTasksIn(t, leader, long, "running")); n != 3 {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})
	if out, err := cli("job", "cancel", long, "--indexes", "50-59"); err != nil {
		t.Fatalf("cancel --indexes: %v: %s", err, out)
	}
	if out, err := cli("job", "cancel", long); err != nil {
		t.Fatalf("cancel: %v: %s", err, out)
	}
	end := waitJobState(t, leader, long, "cancelled")
	var counts struct {
		Job struct {
			Array struct {
				Size, Next, Cancelled, Succeeded, Live int
			} `json:"array"`
		} `json:"job"`
	}
	if err := getJSON(leader.url("/v1/jobs/"+long), &counts); err != nil {
		t.Fatal(err)
	}
	if a := counts.Job.Array; a.Cancelled != 100 || a.Live != 0 || a.Next > 4 {
		t.Fatalf("the cancelled array %v: counts %+v; want 100 cancelled, none live, at most 4 made", end, a)
	}

	// Bad input: one line naming the field, non-zero exit, nothing stored.
	var before, after struct {
		Total int `json:"total"`
	}
	if err := getJSON(leader.url("/v1/jobs/counts"), &before); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"submit", "--array", "5-1", "--", "true"},
		{"submit", "--array", "0-10000000", "--", "true"},
		{"submit", "--array", "0-9%0", "--", "true"},
		{"job", "cancel", id, "--indexes", "40"},
		{"job", "retry", id + ".3", "--indexes", "1"},
	} {
		out, err := cli(args...)
		if err == nil || strings.Count(out, "\n") > 0 || !strings.Contains(out, "array") && !strings.Contains(out, "indexes") {
			t.Errorf("foreman %s: err %v, output %q: want a non-zero exit and one line naming the field", strings.Join(args, " "), err, out)
		}
	}
	if err := getJSON(leader.url("/v1/jobs/counts"), &after); err != nil {
		t.Fatal(err)
	}
	if after.Total != before.Total {
		t.Fatalf("refused commands stored jobs: %d jobs before, %d after", before.Total, after.Total)
	}
}

func listTasks(t *testing.T, a *agentProc, id string) []string { return listTasksIn(t, a, id, "") }

// listTasksIn lists the IDs of an array's tasks (in state, when given).
func listTasksIn(t *testing.T, a *agentProc, id, state string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for {
		var page struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
			Next string `json:"next_cursor"`
		}
		u := a.url("/v1/jobs?limit=17&array=" + id + "&state=" + state + "&cursor=" + cursor)
		if err := getJSON(u, &page); err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.Next == "" {
			return ids
		}
		cursor = page.Next
	}
}

// maxOverlap is the most tasks that held a live attempt at one time.
func maxOverlap(t *testing.T, a *agentProc, ids []string) int {
	t.Helper()
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, id := range ids {
		j, err := getJob(a, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range j.Attempts {
			edges = append(edges, edge{at.AssignedAt, 1}, edge{at.FinishedAt, -1})
		}
	}
	sort.Slice(edges, func(i, k int) bool {
		if !edges[i].at.Equal(edges[k].at) {
			return edges[i].at.Before(edges[k].at)
		}
		return edges[i].d < edges[k].d
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	return most
}
