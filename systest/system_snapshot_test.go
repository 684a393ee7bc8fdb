package systest

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The backup "done when" of issue 11 on real agents: a snapshot of a busy
// 3-node cluster (jobs running and finished), saved through a follower,
// restored into a fresh 3-node cluster with other node names; every job
// acknowledged before the snapshot is found and completes there. Corrupt
// and truncated files are refused with one line and leave the state as it
// was; a second restore over the jobs is refused without --force.
func TestSystemSnapshotRestore(t *testing.T) {
	bin := foremanBin(t)
	a := newSysCluster(t, 3)
	leader := a.leader()
	var long []string
	var dirs []jobDir
	for i := range 4 {
		d := newJobDir(t, a.root)
		dirs = append(dirs, d)
		long = append(long, submitJob(t, leader, d.waitingJob(fmt.Sprintf("long-%d", i))))
	}
	var quick []string
	for i := range 6 {
		quick = append(quick, submitJob(t, leader, map[string]any{"name": fmt.Sprintf("quick-%d", i), "command": []string{"true"}, "driver": "process"}))
	}
	for i := range long {
		dirs[i].pid(t, 1)
	}
	for _, id := range quick {
		waitJobState(t, leader, id, "succeeded")
	}

	file := filepath.Join(a.root, "backup.snap")
	follower := a.followers()[0]
	r := runForeman(t, bin, "http://"+follower.host()+fmt.Sprintf(":%d", follower.base), "operator", "snapshot", "save", file, "--json")
	if r.code != 0 {
		t.Fatalf("snapshot save: exit %d: %s", r.code, r.stderr)
	}
	r = runForeman(t, bin, "http://127.0.0.1:1", "operator", "snapshot", "inspect", file)
	if r.code != 0 || !strings.Contains(r.stdout, "10 (running 4, succeeded 6)") {
		t.Fatalf("snapshot inspect (offline): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("inspect:\n%s", r.stdout)

	// The old cluster goes away before its state is restored elsewhere
	// (its supervisors kill their jobs once the lease runs out).
	for _, ag := range a.agents {
		ag.kill9()
	}

	b := newSysClusterNamed(t, 3, "m")
	bAddr := b.followers()[0].url("")
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)/2] ^= 0xFF
	for name, content := range map[string][]byte{"corrupt": corrupt, "truncated": good[:len(good)-1000]} {
		bad := filepath.Join(a.root, name+".snap")
		if err := os.WriteFile(bad, content, 0o600); err != nil {
			t.Fatal(err)
		}
		r := runForeman(t, bin, bAddr, "operator", "snapshot", "restore", bad)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 || !strings.Contains(r.stderr, map[string]string{"corrupt": "checksum", "truncated": "truncated"}[name]) {
			t.Fatalf("restore of a %s file: exit %d, stderr %q", name, r.code, r.stderr)
		}
		// The agent refuses it too (the CLI checked first).
		req, _ := http.NewRequest(http.MethodPut, bAddr+"/v1/operator/snapshot", bytes.NewReader(content))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("PUT of a %s file: %d, want 400", name, resp.StatusCode)
		}
	}
	// The refused restores replaced nothing: every agent still holds no job
	// and only the new nodes. (Not the raft index: the new agents may still
	// be publishing their node records, GPUs included, meanwhile.)
	b.waitConverged(b.agents)
	for _, ag := range b.agents {
		var counts struct {
			Total int `json:"total"`
		}
		var nodes struct {
			Nodes []struct {
				Name string `json:"name"`
			} `json:"nodes"`
		}
		if err := getJSON(ag.url("/v1/jobs/counts"), &counts); err != nil {
			t.Fatal(err)
		}
		if err := getJSON(ag.url("/v1/nodes"), &nodes); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Nodes {
			if !strings.HasPrefix(n.Name, "m") {
				t.Errorf("%s after the refused restores: node %s of the old cluster", ag.name, n.Name)
			}
		}
		if counts.Total != 0 {
			t.Errorf("%s after the refused restores: %d jobs, want none", ag.name, counts.Total)
		}
	}

	r = runForeman(t, bin, bAddr, "operator", "snapshot", "restore", file)
	if r.code != 0 || !strings.Contains(r.stdout, "n1, n2, n3") {
		t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("restore: %s", r.stdout)
	r = runForeman(t, bin, bAddr, "operator", "snapshot", "restore", file)
	if r.code == 0 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("a second restore over the jobs: exit %d, stderr %q", r.code, r.stderr)
	}

	for _, d := range dirs {
		d.release(t)
	}
	bl := b.leader()
	for _, id := range quick {
		waitJobState(t, bl, id, "succeeded")
	}
	for _, id := range long {
		j := waitJobState(t, bl, id, "succeeded")
		last := j.latest()
		if first := j.attempt(1); first == nil || first.State != "lost" || !strings.HasPrefix(first.Node, "n") ||
			!strings.HasPrefix(last.Node, "m") || last.State != "succeeded" {
			t.Fatalf("job %s: want attempt 1 lost on an old node and the last one succeeded on a new one: %s", id, j)
		}
	}
	extra := submitJob(t, bl, map[string]any{"command": []string{"true"}, "driver": "process"})
	waitJobState(t, bl, extra, "succeeded")

	// The raft operator commands on the same agents, through a follower.
	to := b.followers()[0]
	r = runForeman(t, bin, bAddr, "cluster", "raft", "transfer-leadership", "--to", to.name, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, to.name) {
		t.Fatalf("transfer-leadership: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if l := b.leader(); l != to {
		t.Fatalf("leader is %s after the transfer to %s", l.name, to.name)
	}
	for _, args := range [][]string{{"remove-peer", "nobody"}, {"remove-peer", to.name}, {"transfer-leadership", "--to", "nobody"}} {
		r = runForeman(t, bin, bAddr, append([]string{"cluster", "raft"}, args...)...)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Fatalf("cluster raft %v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		t.Logf("cluster raft %v: %s", args, strings.TrimSpace(r.stderr))
	}
}
