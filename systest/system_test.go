package systest

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
)

func TestSystemThreeAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	bin := foremanBin(t)
	root := t.TempDir()
	var agents []*agentProc
	first := freeBase(t)
	for i := 1; i <= 3; i++ {
		base := first
		if i > 1 {
			base = freeBase(t)
		}
		extra := []string{"--bootstrap-expect", "3"}
		if i > 1 {
			extra = append(extra, "--join", fmt.Sprintf("127.0.0.1:%d", first))
		}
		agents = append(agents, startAgent(t, bin, fmt.Sprintf("sys%d", i), filepath.Join(root, fmt.Sprintf("sys%d", i), "data"), base, extra...))
	}

	// One leader, two followers, seen the same from every agent.
	eventually(t, systemTimeout, "one leader and two followers", func() error {
		var rv raftView
		if err := getJSON(agents[0].url("/v1/cluster/raft"), &rv); err != nil {
			return err
		}
		roles := map[string]int{}
		for _, s := range rv.Servers {
			roles[s.Role]++
		}
		if roles["leader"] != 1 || roles["follower"] != 2 {
			return fmt.Errorf("roles %v", roles)
		}
		for _, a := range agents[1:] {
			l, err := leaderOf(a)
			if err != nil {
				return err
			}
			if l != rv.Leader {
				return fmt.Errorf("%s thinks the leader is %s, %s thinks %s", a.name, l, agents[0].name, rv.Leader)
			}
		}
		return nil
	})

	leaderName, _ := leaderOf(agents[0])
	var follower, leader *agentProc
	for _, a := range agents {
		if a.name == leaderName {
			leader = a
		} else if follower == nil {
			follower = a
		}
	}

	// A submit through a follower is forwarded, and the job runs to success.
	var sub struct {
		ID string `json:"id"`
	}
	if err := postJSON(follower.url("/v1/jobs"), map[string]any{
		"name": "sys", "command": []string{"sh", "-c", "echo system-test"}, "driver": "process",
	}, &sub); err != nil {
		t.Fatal(err)
	}
	if sub.ID == "" {
		t.Fatal("submit returned no job ID")
	}
	waitJobState(t, follower, sub.ID, "succeeded")

	// Kill -9 the leader: a new one is elected and submits keep working.
	_ = syscall.Kill(-leader.cmd.Process.Pid, syscall.SIGKILL)
	_ = leader.cmd.Wait()
	eventually(t, systemTimeout, "a new leader", func() error {
		l, err := leaderOf(follower)
		if err != nil {
			return err
		}
		if l == leader.name {
			return fmt.Errorf("still sees the dead leader %s", l)
		}
		return nil
	})
	var sub2 struct {
		ID string `json:"id"`
	}
	eventually(t, systemTimeout, "submit after failover", func() error {
		return postJSON(follower.url("/v1/jobs"), map[string]any{"command": "true", "driver": "process"}, &sub2)
	})
	// The first job is still there (acknowledged, not lost).
	var got struct {
		Job struct {
			State string `json:"state"`
		} `json:"job"`
	}
	if err := getJSON(follower.url("/v1/jobs/"+sub.ID), &got); err != nil {
		t.Fatal(err)
	}
	if got.Job.State != "succeeded" {
		t.Fatalf("job %s after failover: state %q, want succeeded", sub.ID, got.Job.State)
	}
}
