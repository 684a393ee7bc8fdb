package systest

import (
	"fmt"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

type nodeView struct {
	Name          string    `json:"name"`
	Gossip        string    `json:"gossip"`
	Eligibility   string    `json:"eligibility"`
	DrainDeadline time.Time `json:"drain_deadline"`
}

func TestSystemDrain(t *testing.T) {
	c := newSysCluster(t, 3)
	leader := c.leader()
	d := newJobDir(t, c.root)
	id := submitJob(t, leader, d.waitingJob("long"))
	j := waitJobState(t, leader, id, "running")
	drained := c.byName(j.attempt(1).Node)
	pid := d.pid(t, 1)
	t.Logf("attempt 1 runs on %s (leader %s), pid %d", drained.name, leader.name, pid)

	const drainDeadline = 3 * time.Second
	var nv nodeView
	if err := postJSON(drained.url("/v1/nodes/"+drained.name+"/drain"), map[string]any{"deadline": "3s"}, &nv); err != nil {
		t.Fatal(err)
	}
	drainAt := time.Now()
	if nv.Eligibility != "draining" || nv.DrainDeadline.IsZero() {
		t.Fatalf("drain replied %+v, want draining with a deadline", nv)
	}

	// New work avoids the draining node. Short jobs, so they finish.
	var ids []string
	for i := 0; i < 6; i++ {
		ids = append(ids, submitJob(t, leader, map[string]any{
			"name": fmt.Sprintf("short-%d", i), "command": []string{"/bin/true"}, "driver": "process"}))
	}
	for _, sid := range ids {
		sj := waitJobState(t, leader, sid, "succeeded")
		for _, a := range sj.Attempts {
			if a.Node == drained.name {
				t.Errorf("job %s placed on the draining node %s: %s", sid, drained.name, sj)
			}
		}
	}

	// After the deadline the running attempt is stopped and re-queued elsewhere, uncounted.
	j, took := runningElsewhere(t, leader, id, drained.name, drainAt)
	t.Logf("drained job running on %s %.1fs after the drain (deadline %s)", j.latest().Node, took.Seconds(), drainDeadline)
	if took < drainDeadline-time.Second {
		t.Errorf("the attempt was moved %.1fs after the drain, before the %s deadline", took.Seconds(), drainDeadline)
	}
	a1 := j.attempt(1)
	if a1.State != "killed" || a1.Reason != "drained" || a1.Counted {
		t.Errorf("attempt 1 on the drained node: %+v, want killed: drained, not counted", a1)
	}
	if j.Job.CountedAttempts != 1 {
		t.Errorf("counted attempts %d, want 1 (the drained one is free): %s", j.Job.CountedAttempts, j)
	}
	if processAlive(pid) {
		t.Errorf("the drained copy (pid %d) still runs", pid)
	}
	d.release(t)
	j = waitJobState(t, leader, id, "succeeded")
	if j.Job.Attempts != 2 || j.Job.CountedAttempts != 1 {
		t.Errorf("final: %s, want 2 attempts, 1 counted", j)
	}
}

// TestSystemLeaderFailoverDuringBackoff: a job fails its first attempt with a
// 5 s backoff; the leader is killed -9 during the backoff. The retry must
// happen exactly once and not before the job's NextRunAt.
func TestSystemLeaderFailoverDuringBackoff(t *testing.T) {
	c := newSysCluster(t, 3)
	leader := c.leader()
	d := newJobDir(t, c.root)
	// Kept off the leader so no attempt can land on the node we kill.
	id := submitJob(t, leader, map[string]any{
		"name": "retry-once",
		"command": []string{"/bin/sh", "-c",
			`touch "$SYSDIR/run-$FOREMAN_ATTEMPT-$FOREMAN_NODE-$$"; [ "$FOREMAN_ATTEMPT" -ge 2 ]`},
		"env":          map[string]string{"SYSDIR": string(d)},
		"driver":       "process",
		"max_attempts": 2,
		"backoff":      map[string]any{"initial": "5s", "jitter": 0},
		"constraints":  []string{"sysnode != " + leader.name},
	})
	j := waitJobState(t, leader, id, "retrying")
	nextRunAt := j.Job.NextRunAt
	if nextRunAt.IsZero() {
		t.Fatalf("retrying job without next_run_at: %s", j)
	}
	left := time.Until(nextRunAt)
	t.Logf("attempt 1 %s/%s; next_run_at in %.1fs; killing leader %s", j.attempt(1).State, j.attempt(1).Reason, left.Seconds(), leader.name)
	if left < 2*time.Second {
		t.Fatalf("too little backoff left (%s) to fail over inside it", left)
	}
	killed := time.Now()
	leader.kill9()

	survivor := c.others()[0]
	j = waitJobState(t, survivor, id, "succeeded")
	newLeader := c.leader()
	t.Logf("new leader %s; job succeeded %.1fs after the kill", newLeader.name, time.Since(killed).Seconds())
	a2 := j.attempt(2)
	if j.Job.Attempts != 2 || j.Job.CountedAttempts != 2 || a2 == nil || j.attempt(3) != nil {
		t.Fatalf("want exactly 2 attempts: %s", j)
	}
	if a2.AssignedAt.Before(nextRunAt) {
		t.Errorf("attempt 2 assigned at %s, before next_run_at %s (%.3fs early)", a2.AssignedAt, nextRunAt, nextRunAt.Sub(a2.AssignedAt).Seconds())
	}
	t.Logf("attempt 2 assigned %.3fs after next_run_at", a2.AssignedAt.Sub(nextRunAt).Seconds())
	if r1, r2 := d.runs(1), d.runs(2); len(r1) != 1 || len(r2) != 1 {
		t.Fatalf("executions: attempt 1 %v, attempt 2 %v; want one each", r1, r2)
	}
	// Nothing more happens later (no duplicate from the old leader's last plan).
	c.waitConverged(c.others())
	if j2, err := getJob(newLeader, id); err != nil || j2.Job.Attempts != 2 {
		t.Fatalf("later: %v %v", j2, err)
	}
}

// TestSystemBackoffExplicitZeroJitter is a regression test for a bug the
// failover test found: `"backoff": {"jitter": 0}` was accepted by the API but
// fsm.RetryDelay read a zero Jitter as "unset" and applied a default, so a
// user could not turn jitter off. The API now fills in the default (0.2) and
// the state machine takes zero literally.
func TestSystemBackoffExplicitZeroJitter(t *testing.T) {
	b := fsm.Backoff{Initial: fsm.Duration(5 * time.Second), Multiplier: 2, Max: fsm.Duration(5 * time.Minute), Jitter: 0}
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("01JOB%021d", i)
		if d := fsm.RetryDelay(id, 1, b); d != 5*time.Second {
			t.Errorf("RetryDelay(%s, 1, jitter 0) = %s, want exactly 5s (explicit jitter 0 must mean none)", id, d)
		}
	}
}
