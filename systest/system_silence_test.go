package systest

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// Many clients falling silent at once (SIGSTOP): the leader holds their
// deaths, and every server shows them silent — in GET /v1/nodes from a
// follower, with since when, and in the Nodes page's banner — while their
// records stay alive; nothing is placed on them meanwhile. The operator
// declares them down in one entry (node down --silent); heard again, they
// are alive and the waiting job runs.
func TestSystemHeldSilence(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	c := newSysCluster(t, 3)
	clients := startClients(t, c, 4)
	leader, via := c.leader(), c.followers()[0]
	signal := func(sig syscall.Signal) {
		for _, cl := range clients {
			_ = syscall.Kill(cl.cmd.Process.Pid, sig)
		}
	}
	signal(syscall.SIGSTOP)
	t.Cleanup(func() { signal(syscall.SIGCONT) })

	type nodeList struct {
		Nodes []struct {
			Name        string `json:"name"`
			Role        string `json:"role"`
			Gossip      string `json:"gossip"`
			SilentSince string `json:"silent_since"`
		} `json:"nodes"`
		Summary struct {
			ByState map[string]int `json:"by_state"`
		} `json:"summary"`
	}
	eventually(t, systemTimeout, "the four clients shown silent by a follower", func() error {
		var l nodeList
		if err := getJSON(via.url("/v1/nodes"), &l); err != nil {
			return err
		}
		if l.Summary.ByState["silent"] != 4 {
			return fmt.Errorf("by_state %v", l.Summary.ByState)
		}
		for _, n := range l.Nodes {
			if n.Role == "client" && (n.Gossip != "silent" || n.SilentSince == "") {
				return fmt.Errorf("%s: %s since %q", n.Name, n.Gossip, n.SilentSince)
			}
		}
		return nil
	})
	for _, n := range nodesOf(t, leader) {
		if n.Role == "client" && n.Gossip != "silent" {
			t.Errorf("%s shown %s by the leader", n.Name, n.Gossip)
		}
	}
	if r := runForeman(t, c.bin, via.url(""), "node", "ls", "--state", "silent"); r.code != 0 || !strings.Contains(r.stdout, "4 silent") || strings.Count(r.stdout, " silent ") < 4 {
		t.Errorf("node ls --state silent: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	id := submitJob(t, leader, map[string]any{"name": "for-clients", "command": "true", "driver": "process", "constraints": []string{"kind == client"}})
	eventually(t, systemTimeout, "the job unplaced for the silence", func() error {
		j, err := getJob(leader, id)
		if err != nil {
			return err
		}
		if j.Job.State != "queued" || !strings.Contains(j.Job.Reason, "node silent") || len(j.Attempts) > 0 {
			return fmt.Errorf("%s", j)
		}
		return nil
	})
	b := newBrowser(t)
	b.open(via.url("/ui/nodes"), "#silence-banner")
	b.wait("the banner", `document.querySelector("#silence-banner").textContent.startsWith("4 clients silent since")`)
	b.shot("nodes-silence")

	// The operator's bulk down: a dry run lists them and changes nothing;
	// --yes commits the four dead in one raft entry.
	if r := runForeman(t, c.bin, via.url(""), "node", "down", "--silent", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "would declare 4 client(s) dead: c1, c2, c3, c4") {
		t.Fatalf("node down --silent --dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := runForeman(t, c.bin, via.url(""), "node", "down", "--silent", "--yes", "--json")
	var down struct {
		Nodes []string `json:"nodes"`
		Index uint64   `json:"index"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &down) != nil || len(down.Nodes) != 4 || down.Index == 0 {
		t.Fatalf("node down --silent --yes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var l nodeList
	if err := getJSON(leader.url("/v1/nodes?consistent=true"), &l); err != nil || l.Summary.ByState["dead"] != 4 || l.Summary.ByState["silent"] != 0 {
		t.Fatalf("after the bulk down: %v %v", l.Summary.ByState, err)
	}
	if r := runForeman(t, c.bin, via.url(""), "node", "down", "--silent", "--yes"); r.code == 0 || !strings.Contains(r.stderr, "no client is silent") {
		t.Errorf("node down --silent with none silent: exit %d, stderr %q", r.code, r.stderr)
	}

	// Heard again, they are alive and the waiting job runs.
	signal(syscall.SIGCONT)
	waitJobState(t, leader, id, "succeeded")
	eventually(t, systemTimeout, "the clients shown alive again", func() error {
		var l nodeList
		if err := getJSON(via.url("/v1/nodes"), &l); err != nil {
			return err
		}
		if l.Summary.ByState["silent"] != 0 || l.Summary.ByState["alive"] != 7 {
			return fmt.Errorf("by_state %v", l.Summary.ByState)
		}
		return nil
	})

	// Bulk drain and eligibility by label, through a follower: one entry
	// each; a label that matches nothing and a bad label change nothing.
	r = runForeman(t, c.bin, via.url(""), "node", "drain", "--label", "kind=client", "--role", "client", "--yes", "--json")
	var changed struct {
		Nodes []string `json:"nodes"`
		Index uint64   `json:"index"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &changed) != nil || len(changed.Nodes) != 4 || changed.Index == 0 {
		t.Fatalf("node drain --label: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, n := range nodesOf(t, leader) {
		if want := map[bool]string{true: "draining", false: "eligible"}[n.Role == "client"]; n.Eligibility != want {
			t.Errorf("after the bulk drain %s is %s, want %s", n.Name, n.Eligibility, want)
		}
	}
	if r := runForeman(t, c.bin, via.url(""), "node", "eligibility", "--enable", "--label", "kind=client", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "marked eligible 4 node(s): c1, c2, c3, c4") {
		t.Errorf("node eligibility --enable --label: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runForeman(t, c.bin, via.url(""), "node", "drain", "--label", "kind=none", "--yes"); r.code == 0 || !strings.Contains(r.stderr, "labels: no node matches") {
		t.Errorf("node drain of no node: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runForeman(t, c.bin, via.url(""), "node", "drain", "--label", "kind", "--yes"); r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "want key=value") {
		t.Errorf("node drain --label kind: exit %d, stderr %q", r.code, r.stderr)
	}
}
