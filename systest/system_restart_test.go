package systest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSystemAgentRestartKeepsJob: SIGTERM the agent running a job and start
// it again from the same data dir with the same flags. The job keeps running
// (same PID, same attempt) and its result is reported when it ends.
func TestSystemAgentRestartKeepsJob(t *testing.T) {
	// On a follower, and on the leader (whose SIGTERM transfers leadership first).
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) { agentRestartKeepsJob(t, role) })
	}
}

func agentRestartKeepsJob(t *testing.T, role string) {
	c := newSysCluster(t, 3)
	leader := c.leader()
	d := newJobDir(t, c.root)
	node := leader
	if role == "follower" {
		node = c.followers()[0]
	}
	// Only node is eligible while the job is placed.
	for _, o := range c.others(node) {
		setEligibility(t, leader, o.name, "ineligible")
	}
	id := submitJob(t, leader, d.waitingJob("long"))
	j := waitJobState(t, leader, id, "running")
	if j.attempt(1).Node != node.name {
		t.Fatalf("want attempt 1 on %s: %s", node.name, j)
	}
	for _, o := range c.others(node) {
		setEligibility(t, leader, o.name, "eligible")
	}
	pid := d.pid(t, 1)
	tok := j.attempt(1).FencingToken
	survivor := c.others(node)[0]

	stopped := time.Now()
	exitTook := node.term(t)
	if !processAlive(pid) {
		t.Fatalf("the job (pid %d) died with its agent's graceful stop", pid)
	}
	node.restart(t)
	eventually(t, systemTimeout, node.name+" ready again", func() error {
		var r struct {
			Status string `json:"status"`
		}
		return getJSON(node.url("/v1/ready"), &r)
	})
	t.Logf("%s exited %.1fs after SIGTERM, ready again %.1fs after it", node.name, exitTook.Seconds(), time.Since(stopped).Seconds())

	// Past one more lease: the re-adopted attempt is being renewed.
	renewedUntil := time.Now().Add(defaultLease + killSlack)
	eventually(t, systemTimeout, "one lease after the restart", func() error {
		if !processAlive(pid) {
			t.Fatalf("the job (pid %d) was killed after the agent restarted", pid)
		}
		if time.Now().Before(renewedUntil) {
			return fmt.Errorf("waiting")
		}
		return nil
	})
	j, err := getJob(node, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Job.State != "running" || j.Job.Attempts != 1 || j.attempt(1).State != "running" || j.attempt(1).FencingToken != tok {
		t.Fatalf("after the restart: %s", j)
	}
	d.release(t)
	j = waitJobState(t, survivor, id, "succeeded")
	if j.Job.Attempts != 1 || j.attempt(1).State != "succeeded" {
		t.Fatalf("final: %s", j)
	}
	if runs := d.runs(1); len(runs) != 1 {
		t.Fatalf("attempt 1 executed %d times: %v", len(runs), runs)
	}
}

// TestSystemDevNodeKilled: one node (--bootstrap-expect 1). kill -9 of the
// agent leaves the supervisor holding an unrenewed lease: it kills the job
// after the lease. When the agent comes back the attempt is reported
// killed: fenced (docs/operations.md), which does not use up an attempt, and
// the job is re-queued and runs again.
func TestSystemDevNodeKilled(t *testing.T) {
	bin := foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	ip := subnet() + ".1"
	a := startAgentAt(t, bin, "solo", filepath.Join(root, "solo", "data"), ip, freeBaseOn(t, ip),
		"--bootstrap-expect", "1", "--default-driver", "process")
	eventually(t, systemTimeout, "solo leads", func() error {
		l, err := leaderOf(a)
		if err == nil && l != "solo" {
			err = fmt.Errorf("leader %s", l)
		}
		return err
	})
	d := newJobDir(t, root)
	id := submitJob(t, a, d.waitingJob("long"))
	waitJobState(t, a, id, "running")
	pid := d.pid(t, 1)

	killed := time.Now()
	a.kill9()
	deadAfter := waitDead(t, pid, killed)
	t.Logf("job (pid %d) gone %.1fs after kill -9 of the only agent (lease %s)", pid, deadAfter.Seconds(), defaultLease)
	if deadAfter > defaultLease+killSlack {
		t.Errorf("the supervisor killed the job %.1fs after the agent died; want ≤ %s", deadAfter.Seconds(), defaultLease+killSlack)
	}
	if deadAfter < defaultLease-time.Second {
		t.Errorf("the job died %.1fs after the agent, before the lease (%s) ran out", deadAfter.Seconds(), defaultLease)
	}

	a.restart(t)
	restarted := time.Now()
	var j *jobView
	eventually(t, systemTimeout, "attempt 1 reported and the job re-run", func() error {
		j, err = getJob(a, id)
		if err != nil {
			return err
		}
		if j.attempt(1).Live() || j.attempt(2) == nil || j.attempt(2).State != "running" {
			return fmt.Errorf("%s", j)
		}
		return nil
	})
	t.Logf("%.1fs after the restart: %s", time.Since(restarted).Seconds(), j)
	if a1 := j.attempt(1); a1.State != "killed" || a1.Reason != "fenced" || a1.Counted {
		t.Errorf("attempt 1: %s/%s counted=%v, want killed: fenced and not counted (docs/operations.md)", a1.State, a1.Reason, a1.Counted)
	}
	d.release(t)
	j = waitJobState(t, a, id, "succeeded")
	if j.Job.Attempts != 2 || j.Job.CountedAttempts != 1 {
		t.Errorf("final: %s, want 2 attempts of which 1 counted", j)
	}
}
