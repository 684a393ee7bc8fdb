package systest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The "done when" tests of the scheduling issue on real agents: a node that
// dies or is cut off stops its own copy (lease) before the job runs
// elsewhere, and the replaced attempt never becomes the job's result. How
// long the rerun takes (the 15 s budget) is logged with its phases here and
// measured by make bench (BenchmarkNodeLostRerun).

// runningElsewhere waits until the job's latest attempt is running on a node
// other than old, and returns it and the time it was first seen so.
func runningElsewhere(t testing.TB, a *agentProc, id, old string, since time.Time) (*jobView, time.Duration) {
	t.Helper()
	var j *jobView
	err := poll(measureTimeout, func() error {
		var err error
		if j, err = getJob(a, id); err != nil {
			return err
		}
		l := j.latest()
		if l == nil || l.Node == old || l.State != "running" {
			return fmt.Errorf("%s", j)
		}
		return nil
	})
	took := time.Since(since)
	if err != nil {
		t.Fatalf("job never ran on a node other than %s within %s: %v", old, measureTimeout, err)
	}
	return j, took
}

// waitDead waits for pid to disappear and returns how long after since it was seen gone.
func waitDead(t testing.TB, pid int, since time.Time) time.Duration {
	t.Helper()
	if err := poll(measureTimeout, func() error {
		if processAlive(pid) {
			return fmt.Errorf("pid %d alive", pid)
		}
		return nil
	}); err != nil {
		t.Fatalf("the first copy (pid %d) still runs %s after its node was lost", pid, measureTimeout)
	}
	return time.Since(since)
}

// watchNodeDead polls a's node list until node is dead or left to gossip
// and returns a func that tells how long after since that was first seen
// (-1ns if not within 2 s of asking). It names the phase a slow rerun spent its time in.
func watchNodeDead(t testing.TB, a *agentProc, node string, since time.Time) func() time.Duration {
	t.Helper()
	var seen atomic.Int64
	seen.Store(-1)
	ctx, cancel := context.WithTimeout(context.Background(), measureTimeout)
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			var nodes struct {
				Nodes []struct {
					Name   string `json:"name"`
					Gossip string `json:"gossip"`
				} `json:"nodes"`
			}
			if err := getJSON(a.url("/v1/nodes"), &nodes); err == nil {
				for _, n := range nodes.Nodes {
					if n.Name == node && (n.Gossip == "dead" || n.Gossip == "left") {
						seen.Store(int64(time.Since(since)))
						return
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() time.Duration {
		// The state may have turned dead since the last poll: give the
		// poller a moment to see it before answering "never".
		_ = poll(2*time.Second, func() error {
			if seen.Load() < 0 {
				return fmt.Errorf("%s not dead yet", node)
			}
			return nil
		})
		return time.Duration(seen.Load())
	}
}

// reportRerun logs where a rerun's time went. The rerun's speed is a
// figure (make bench: BenchmarkNodeLostRerun, against the 15 s budget),
// not an assertion: under load it stretches, and the test keeps only the
// promise (the replacement starts after the old copy is dead) and a bound
// that catches a hang (runningElsewhere's measureTimeout).
func reportRerun(t testing.TB, what string, deadAfter, nodeDead, took time.Duration) {
	t.Helper()
	t.Logf("after %s: old copy gone %.1fs, node dead in the leader's state %.1fs, replacement running %.1fs (budget %s)",
		what, deadAfter.Seconds(), nodeDead.Seconds(), took.Seconds(), rerunTarget)
	if took > rerunTarget {
		t.Logf("NOTE: the rerun took longer than the %s budget on this (loaded?) machine", rerunTarget)
	}
}

// offLeader is a long job running on a node other than the leader.
type offLeader struct {
	d              jobDir
	id             string
	leader, victim *agentProc // victim: the node running attempt 1
	pid            int        // attempt 1's process
}

// runOffLeader starts a long job kept off the leader (label constraint),
// so a test measures the dead-node path, not an election; a replacement
// may go to either other node but the leader.
func runOffLeader(t testing.TB, c *sysCluster) offLeader {
	t.Helper()
	o := offLeader{d: newJobDir(t, c.root), leader: c.leader()}
	o.id = submitJob(t, o.leader, o.d.waitingJob("long", "sysnode != "+o.leader.name))
	j := waitJobState(t, o.leader, o.id, "running")
	o.victim = c.byName(j.attempt(1).Node)
	o.pid = o.d.pid(t, 1)
	t.Logf("attempt 1 runs on %s (%s), leader %s, pid %d", o.victim.name, o.victim.ip, o.leader.name, o.pid)
	return o
}

func TestSystemNodeKilled(t *testing.T) {
	c := newSysCluster(t, 3)
	o := runOffLeader(t, c)
	d, id, leader, victim, pid := o.d, o.id, o.leader, o.victim, o.pid
	term := termOf(t, leader)

	killed := time.Now()
	victim.kill9()
	nodeDead := watchNodeDead(t, leader, victim.name, killed)

	deadAfter := waitDead(t, pid, killed)
	t.Logf("first copy gone %.1fs after kill -9 of its agent (lease %s)", deadAfter.Seconds(), defaultLease)
	if deadAfter > defaultLease+killSlack {
		t.Errorf("the supervisor killed the orphaned job %.1fs after its agent died; want ≤ lease %s + %s", deadAfter.Seconds(), defaultLease, killSlack)
	}

	j, took := runningElsewhere(t, leader, id, victim.name, killed)
	t.Logf("job running on %s %.1fs after kill -9 of %s", j.latest().Node, took.Seconds(), victim.name)
	reportRerun(t, "kill -9", deadAfter, nodeDead(), took)
	if now := termOf(t, leader); now != term {
		// An election (a stall of the loaded machine longer than the
		// leader's lease) restarts the new leader's wait for the dead node.
		t.Logf("raft term %d → %d during the test", term, now)
	}
	if took < deadAfter-500*time.Millisecond {
		t.Errorf("invariant 2: the replacement ran %.1fs after kill -9 but the old copy died only at %.1fs", took.Seconds(), deadAfter.Seconds())
	}
	a1 := j.attempt(1)
	if !(a1.State == "lost" || (a1.State == "killed" && a1.Reason == "fenced")) || a1.Counted {
		t.Errorf("attempt 1 on the dead node: %+v, want lost (or killed: fenced) and not counted", a1)
	}
	if got := j.latest().FinishedAt; !got.IsZero() {
		t.Errorf("the replacement is already finished: %s", j)
	}

	// The dead node comes back: its supervisor's result (killed: fenced) is stale
	// and must not become the job's result.
	victim.restart(t)
	c.waitConverged(c.agents)
	if j, err := getJob(leader, id); err != nil {
		t.Fatal(err)
	} else if j.Job.State != "running" || j.latest().Num != 2 || j.attempt(1).State != a1.State {
		t.Fatalf("after the old node rejoined: %s (attempt 1 was %s/%s)", j, a1.State, a1.Reason)
	}
	d.release(t)
	j = waitJobState(t, leader, id, "succeeded")
	if j.Job.Attempts != 2 || j.Job.CountedAttempts != 1 || j.attempt(1).State != a1.State {
		t.Fatalf("final: %s", j)
	}
	if runs := d.runs(2); len(runs) != 1 {
		t.Fatalf("attempt 2 executed %d times: %v", len(runs), runs)
	}
}

// iptablesCut drops every packet from and to ip (INPUT and OUTPUT) with rules
// tagged foreman-systest-<pid>; the returned heal removes exactly those rules
// (it is also registered as a cleanup).
func iptablesCut(t testing.TB, ip string) (heal func()) {
	t.Helper()
	tag := fmt.Sprintf("foreman-systest-%d", mypid)
	var rules [][]string
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		for _, dir := range []string{"-s", "-d"} {
			rules = append(rules, []string{chain, dir, ip, "-m", "comment", "--comment", tag, "-j", "DROP"})
		}
	}
	healed := false
	heal = func() {
		if healed {
			return
		}
		healed = true
		for _, r := range rules {
			args := append([]string{"-w", "-D"}, r...)
			// Delete until gone (an insert may have been retried).
			for i := 0; i < 5; i++ {
				if err := exec.Command("iptables", args...).Run(); err != nil {
					break
				}
			}
		}
	}
	t.Cleanup(heal)
	for _, r := range rules {
		args := append([]string{"-w", "-I"}, r...)
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	return heal
}

func TestSystemNodeCutOff(t *testing.T) {
	err := haveIptables()
	requireCapability(t, err == nil, fmt.Sprintf("root + iptables (%v)", err))
	c := newSysCluster(t, 3)
	o := runOffLeader(t, c)
	d, id, leader, victim, pid := o.d, o.id, o.leader, o.victim, o.pid

	cut := time.Now()
	heal := iptablesCut(t, victim.ip)
	nodeDead := watchNodeDead(t, leader, victim.name, cut)

	deadAfter := waitDead(t, pid, cut)
	t.Logf("isolated copy gone %.1fs after the cut (contact timeout %s + lease %s)", deadAfter.Seconds(), leaderContact, defaultLease)
	if deadAfter > leaderContact+defaultLease+killSlack {
		t.Errorf("the isolated node's supervisor killed its copy %.1fs after the cut; want ≤ %s", deadAfter.Seconds(), leaderContact+defaultLease+killSlack)
	}
	j, took := runningElsewhere(t, leader, id, victim.name, cut)
	t.Logf("job running on %s %.1fs after the cut", j.latest().Node, took.Seconds())
	reportRerun(t, "the cut", deadAfter, nodeDead(), took)
	// The replacement may only start after the isolated copy is dead (invariant 2).
	a2 := j.latest()
	if pid2 := d.pid(t, a2.Num); !processAlive(pid2) {
		t.Fatalf("replacement pid %d is not running", pid2)
	}
	if took < deadAfter-500*time.Millisecond {
		t.Errorf("invariant 2: the replacement ran %.1fs after the cut but the old copy died only at %.1fs", took.Seconds(), deadAfter.Seconds())
	}
	a1 := *j.attempt(1)

	heal()
	healed := time.Now()
	idx := c.waitConverged(c.agents)
	t.Logf("converged at index %d, %.1fs after healing", idx, time.Since(healed).Seconds())
	j, err = getJob(victim, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Job.State != "running" || j.latest().Num != a2.Num || j.attempt(1).State != a1.State || j.attempt(1).Reason != a1.Reason {
		t.Fatalf("after healing (seen from the old node): %s; attempt 1 was %s/%s", j, a1.State, a1.Reason)
	}
	if a1.State != "lost" && !(a1.State == "killed" && a1.Reason == "fenced") {
		t.Errorf("attempt 1: %s/%s, want lost or killed: fenced", a1.State, a1.Reason)
	}
	d.release(t)
	j = waitJobState(t, leader, id, "succeeded")
	if j.latest().Num != a2.Num || j.attempt(1).State != a1.State {
		t.Fatalf("final: %s", j)
	}
	if runs := d.runs(1); len(runs) != 1 {
		t.Fatalf("attempt 1 executed %d times: %v", len(runs), runs)
	}
}

// setEligibility marks node eligible or ineligible through any agent.
func setEligibility(t testing.TB, via *agentProc, node, e string) {
	t.Helper()
	eventually(t, systemTimeout, node+" "+e, func() error {
		return postJSON(via.url("/v1/nodes/"+node+"/eligibility"), map[string]any{"eligibility": e}, nil)
	})
}

// TestSystemLeaderKilledWithJob: the node running the job is the leader.
// After kill -9 a new leader has no history of the old one, so it waits the
// lease plus margin from taking office before re-placing the job.
func TestSystemLeaderKilledWithJob(t *testing.T) {
	c := newSysCluster(t, 3)
	d := newJobDir(t, c.root)
	leader := c.leader()
	// Put the job on the leader: the followers are ineligible while it is placed.
	for _, f := range c.followers() {
		setEligibility(t, leader, f.name, "ineligible")
	}
	id := submitJob(t, leader, d.waitingJob("long"))
	j := waitJobState(t, leader, id, "running")
	if j.attempt(1).Node != leader.name {
		t.Fatalf("want attempt 1 on the leader %s: %s", leader.name, j)
	}
	for _, f := range c.followers() {
		setEligibility(t, leader, f.name, "eligible")
	}
	pid := d.pid(t, 1)

	killed := time.Now()
	leader.kill9()
	survivor := c.others()[0]
	nodeDead := watchNodeDead(t, survivor, leader.name, killed)
	deadAfter := waitDead(t, pid, killed)
	t.Logf("the old leader's copy gone %.1fs after kill -9 (lease %s)", deadAfter.Seconds(), defaultLease)
	if deadAfter > defaultLease+killSlack {
		t.Errorf("killed %.1fs after the agent died; want ≤ %s", deadAfter.Seconds(), defaultLease+killSlack)
	}
	j, took := runningElsewhere(t, survivor, id, leader.name, killed)
	t.Logf("job running on %s %.1fs after kill -9 of the leader %s (new leader %s)", j.latest().Node, took.Seconds(), leader.name, c.leader().name)
	reportRerun(t, "kill -9 of the leader", deadAfter, nodeDead(), took)
	if took < deadAfter-500*time.Millisecond {
		t.Errorf("invariant 2: the replacement ran %.1fs after kill -9 but the old copy died only at %.1fs", took.Seconds(), deadAfter.Seconds())
	}
	if a1 := j.attempt(1); !(a1.State == "lost" || (a1.State == "killed" && a1.Reason == "fenced")) || a1.Counted {
		t.Errorf("attempt 1: %+v, want lost (or killed: fenced), not counted", a1)
	}
	d.release(t)
	j = waitJobState(t, survivor, id, "succeeded")
	if runs := d.runs(2); len(runs) != 1 || j.latest().Num != 2 {
		t.Fatalf("final %s; attempt 2 runs %v", j, runs)
	}
}
