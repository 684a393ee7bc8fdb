package systest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// `foreman submit --after` and `--singleton` on real agents, through a
// follower: a job waits for a job submitted before it and starts only once
// that one succeeded; a requirement that cannot be met ends it cancelled
// with the reason; singleton jobs of one name run one after the other; a
// parent that does not exist is refused with one line and nothing stored.
func TestSystemAfter(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	bin := foremanBin(t)
	c := newSysCluster(t, 3)
	leader, via := c.leader(), c.followers()[0]
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(cmd.Environ(), "FOREMAN_ADDR="+via.url(""))
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return strings.TrimSpace(string(ee.Stderr)), err
		}
		return strings.TrimSpace(string(out)), err
	}
	d := newJobDir(t, t.TempDir())
	parent := submitJob(t, leader, d.waitingJob("after-parent"))
	d.pid(t, 1) // running

	ok, err := cli("submit", "--after", parent+":ok", "--", "true")
	if err != nil {
		t.Fatalf("submit --after %s:ok: %v: %s", parent, err, ok)
	}
	notok, err := cli("submit", "--json", "--after", parent+":failed", "--", "true")
	if err != nil {
		t.Fatalf("submit --after %s:failed: %v: %s", parent, err, notok)
	}
	var sub struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(notok), &sub); err != nil || sub.ID == "" {
		t.Fatalf("submit --json printed %q (%v)", notok, err)
	}
	notok = sub.ID
	for _, id := range []string{ok, notok} {
		if j, err := getJob(leader, id); err != nil || j.Job.State != "waiting" || len(j.Attempts) != 0 {
			t.Fatalf("job %s while its parent runs: %v %v", id, j, err)
		}
	}

	d.release(t)
	p := waitJobState(t, leader, parent, "succeeded")
	child := waitJobState(t, leader, ok, "succeeded")
	if a, pa := child.attempt(1), p.attempt(1); a == nil || pa == nil || a.AssignedAt.Before(pa.FinishedAt) {
		t.Fatalf("the child was placed before its parent finished: child %v, parent %v", child, p)
	}
	cancelled := waitJobState(t, leader, notok, "cancelled")
	want := fmt.Sprintf("dependency after %s:failed cannot be met: job %s is succeeded", parent, parent)
	if cancelled.Job.Reason != want || len(cancelled.Attempts) != 0 {
		t.Fatalf("the afternotok job on a success: %v; want reason %q and no attempt", cancelled, want)
	}

	if out, err := cli("job", "status", notok); err != nil || !strings.Contains(out, "Depends on:  "+parent+" (failed) · cancelled by "+parent) {
		t.Errorf("job status %s: %v\n%s\nwant the line %q", notok, err, out, "Depends on:  "+parent+" (failed) · cancelled by "+parent)
	}

	// A parent that already ended decides at submit.
	late, err := cli("submit", "--after", parent+":any", "--", "true")
	if err != nil {
		t.Fatalf("submit --after an ended job: %v: %s", err, late)
	}
	waitJobState(t, leader, late, "succeeded")

	// --singleton: jobs of one name run one at a time, in submit order.
	s := newJobDir(t, t.TempDir())
	spec := s.waitingJob("sys-single")
	spec["singleton"] = true
	first := submitJob(t, leader, spec)
	s.pid(t, 1)
	second, err := cli("submit", "--name", "sys-single", "--singleton", "--", "true")
	if err != nil {
		t.Fatalf("submit --singleton: %v: %s", err, second)
	}
	if j, err := getJob(leader, second); err != nil || j.Job.State != "waiting" {
		t.Fatalf("the second singleton while the first runs: %v %v", j, err)
	}
	s.release(t)
	f := waitJobState(t, leader, first, "succeeded")
	sec := waitJobState(t, leader, second, "succeeded")
	if sec.attempt(1).AssignedAt.Before(f.attempt(1).FinishedAt) {
		t.Fatalf("the second singleton was placed before the first ended: %v, %v", sec, f)
	}

	// Bad input: one line naming the field, non-zero exit, nothing stored.
	var before struct {
		Total int `json:"total"`
	}
	if err := getJSON(leader.url("/v1/jobs/counts"), &before); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"submit", "--after", "01JNOSUCHJOB00000000000000:ok", "--", "true"},
		{"submit", "--after", parent + ":sometimes", "--", "true"},
		{"submit", "--after", parent, "--depends-on", ok, "--", "true"},
		{"submit", "--singleton", "--", "true"},
	} {
		out, err := cli(args...)
		if err == nil || strings.Count(out, "\n") > 0 || !strings.Contains(out, "after") && !strings.Contains(out, "depends_on") && !strings.Contains(out, "singleton") {
			t.Errorf("foreman %s: err %v, output %q: want a non-zero exit and one line naming the field", strings.Join(args, " "), err, out)
		}
	}
	var after struct {
		Total int `json:"total"`
	}
	if err := getJSON(leader.url("/v1/jobs/counts"), &after); err != nil {
		t.Fatal(err)
	}
	if after.Total != before.Total {
		t.Fatalf("refused submits stored jobs: %d jobs before, %d after", before.Total, after.Total)
	}
}
