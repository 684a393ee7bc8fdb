package systest

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// clientNode is a node as GET /v1/nodes shows it.
type clientNode struct {
	Name        string `json:"name"`
	Role        string `json:"role"`
	Gossip      string `json:"gossip"`
	Eligibility string `json:"eligibility"`
}

// startClients starts n agents beside c's servers with only --join, as
// the README starts every later host: --role auto makes them clients, the
// cluster having its 3 voters. They sit on the servers' 127.X.Y subnet,
// each labelled sysnode=<name> and kind=client; it waits until the leader
// records them alive as clients.
func startClients(t testing.TB, c *sysCluster, n int) []*agentProc {
	t.Helper()
	s0 := c.agents[0]
	prefix := s0.ip[:strings.LastIndex(s0.ip, ".")]
	var join []string
	for _, s := range c.agents {
		join = append(join, "--join", net.JoinHostPort(s.ip, fmt.Sprint(s.base)))
	}
	var clients []*agentProc
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("c%d", i)
		args := append([]string{"--label", "sysnode=" + name, "--label", "kind=client",
			"--default-driver", "process"}, join...)
		clients = append(clients, startAgentAt(t, c.bin, name, filepath.Join(c.root, name, "data"),
			fmt.Sprintf("%s.%d", prefix, 10+i), s0.base, args...))
	}
	eventually(t, systemTimeout, fmt.Sprintf("%d clients registered alive", n), func() error {
		alive := 0
		for _, nd := range nodesOf(t, c.leader()) {
			if nd.Role == "client" && nd.Gossip == "alive" {
				alive++
			}
		}
		if alive != n {
			return fmt.Errorf("%d of %d clients alive", alive, n)
		}
		return nil
	})
	return clients
}

func nodesOf(t testing.TB, a *agentProc) []clientNode {
	t.Helper()
	var nodes struct {
		Nodes []clientNode `json:"nodes"`
	}
	if err := getJSON(a.url("/v1/nodes?consistent=true"), &nodes); err != nil {
		t.Logf("nodes of %s: %v", a.name, err)
	}
	return nodes.Nodes
}

// 3 servers and 3 clients (agents outside raft) on real processes: jobs
// run on the clients, their logs are read through a server; a workflow's
// inputs and a checkpoint cross from one client to another; a client
// killed with -9 has its job rerun on another client only after the old
// copy died (invariant 2); the leader killed with -9 costs the clients'
// jobs nothing; the killed client comes back and registers again; a
// rolling restart of every role runs a job through once; node down.
func TestSystemClients(t *testing.T) {
	c := newSysCluster(t, 3)
	clients := startClients(t, c, 3)
	leader := c.leader()

	// A job on a client; its logs through a server (proxied to the client).
	id := submitJob(t, leader, map[string]any{
		"name": "hello", "command": []string{"/bin/sh", "-c", "echo hello-from-$FOREMAN_NODE"},
		"driver": "process", "constraints": []string{"sysnode == c2"},
	})
	j := waitJobState(t, leader, id, "succeeded")
	if j.latest().Node != "c2" {
		t.Fatalf("the job ran on %s, want c2", j.latest().Node)
	}
	for _, s := range c.agents {
		if lr := runForeman(t, c.bin, s.url(""), "logs", id); lr.code != 0 || strings.TrimSpace(lr.stdout) != "hello-from-c2" {
			t.Errorf("logs through %s: exit %d, stdout %q, stderr %q", s.name, lr.code, lr.stdout, lr.stderr)
		}
	}
	// A workflow across the clients: the child on c1 reads the result and
	// the artifact its parent wrote on c2. A client knows no other node's
	// address: it fetches them through a server, which proxies to c2.
	var sub struct {
		Jobs []struct{ Name, ID string } `json:"jobs"`
	}
	one := 1
	wf := map[string]any{"name": "across-clients", "jobs": []map[string]any{
		{"name": "parent", "driver": "process", "max_attempts": one, "constraints": []string{"sysnode == c2"},
			"command": `printf "p-on-$FOREMAN_NODE" > "$FOREMAN_RESULT" && mkdir -p "$FOREMAN_ARTIFACTS/d" && printf art > "$FOREMAN_ARTIFACTS/d/f"`},
		{"name": "child", "driver": "process", "max_attempts": one, "constraints": []string{"sysnode == c1"}, "depends_on": []string{"parent"},
			"command": `test "$(cat "$FOREMAN_INPUTS/parent/result")" = p-on-c2 && test "$(cat "$FOREMAN_INPUTS/parent/artifacts/d/f")" = art`},
	}}
	if err := postJSON(leader.url("/v1/workflows"), wf, &sub); err != nil || len(sub.Jobs) != 2 {
		t.Fatalf("submit the workflow: %v (%+v)", err, sub)
	}
	for _, jr := range sub.Jobs {
		if jr.Name == "child" {
			if j := waitJobState(t, leader, jr.ID, "succeeded"); j.latest().Node != "c1" {
				t.Errorf("the child ran on %s, want c1", j.latest().Node)
			}
		}
	}

	// A job's checkpoint follows it from one client to the other: attempt
	// 1, on c2 (c1 ineligible), writes it and is stopped by a drain's
	// deadline; attempt 2, on c1, finds it, fetched through a server that
	// relays it from c2.
	cli := func(args ...string) {
		t.Helper()
		if r := runForeman(t, c.bin, leader.url(""), args...); r.code != 0 {
			t.Fatalf("foreman %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	cli("node", "eligibility", "c1", "ineligible")
	id = submitJob(t, leader, map[string]any{"name": "checkpointed", "driver": "process", "max_attempts": 3,
		"constraints": []string{"kind == client"},
		"command": `if [ -f "$FOREMAN_CHECKPOINT/from" ]; then test "$(cat "$FOREMAN_CHECKPOINT/from")" = c2 && test "$FOREMAN_NODE" = c1; exit; fi
printf "$FOREMAN_NODE" > "$FOREMAN_CHECKPOINT/from" && exec sleep 600`})
	waitJobState(t, leader, id, "running")
	cli("node", "eligibility", "c1", "eligible")
	cli("node", "drain", "c2", "--deadline", "1s")
	if j := waitJobState(t, leader, id, "succeeded"); j.latest().Node != "c1" || j.attempt(1).Node != "c2" {
		t.Errorf("the checkpointed job: %s; want attempt 1 on c2, the last on c1", j)
	}
	cli("node", "eligibility", "c2", "eligible")

	if lr := runForeman(t, c.bin, clients[0].url(""), "node", "ls"); lr.code == 0 || !strings.Contains(lr.stderr, "client agent") {
		t.Errorf("the API of a client: exit %d, stderr %q; want a refusal naming the servers", lr.code, lr.stderr)
	}

	// The Nodes page: the summary of every node by role and state, and the
	// role filter; the node page names the role.
	b := newBrowser(t)
	b.open(leader.url("/ui/nodes"), `tr[data-node="c1"]`)
	b.wait("summary", `document.querySelector("#node-summary").textContent.startsWith("6 nodes: 3 servers, 3 clients")`)
	// Each state's count sits on its badge's line, and a role or version
	// never wraps mid-word (one line box each).
	b.wait("summary counts inline", `(() => { const cs = [...document.querySelectorAll("#node-summary .state-count")];
		return cs.length > 0 && cs.every((c) => c.getClientRects().length === 1 && getComputedStyle(c.querySelector(".badge")).display === "inline-block"); })()`)
	b.wait("roles never wrap", `(() => { const tds = [...document.querySelectorAll("#nodes td.role")];
		return tds.length > 0 && tds.every((td) => getComputedStyle(td).whiteSpace === "nowrap"); })()`)
	b.open(leader.url("/ui/nodes?role=client"), `tr[data-node="c1"]`)
	b.wait("only clients", `document.querySelectorAll("#nodes tbody tr").length === 3 && [...document.querySelectorAll("#nodes td.role")].every((td) => td.textContent === "client")`)
	b.shot("nodes-clients")
	b.open(leader.url("/ui/nodes/c2"), "dl.kv")
	b.wait("role shown", `document.querySelector("dl.kv").textContent.includes("client (outside raft")`)
	b.wait("a client can be declared down", `document.querySelector('[data-action="down"]') !== null`)
	b.open(leader.url("/ui/nodes/"+leader.name), "dl.kv")
	b.wait("a server cannot", `document.querySelector('[data-action="drain"]') !== null && document.querySelector('[data-action="down"]') === null`)

	// The leader counts the clients' streams on each server: 3 in all, in
	// `foreman cluster raft` and on the Cluster page.
	eventually(t, systemTimeout, "the 3 clients' streams counted", func() error {
		r := runForeman(t, c.bin, c.leader().url(""), "cluster", "raft", "--json")
		var info struct {
			Servers []struct {
				ID      string
				Clients *int
			}
		}
		if err := json.Unmarshal([]byte(r.stdout), &info); r.code != 0 || err != nil {
			return fmt.Errorf("cluster raft: exit %d, %v: %s", r.code, err, r.stderr)
		}
		sum := 0
		for _, s := range info.Servers {
			if s.Clients == nil {
				return fmt.Errorf("no client count for %s", s.ID)
			}
			sum += *s.Clients
		}
		if sum != 3 {
			return fmt.Errorf("%d streams counted: %s", sum, r.stdout)
		}
		return nil
	})
	b.open(c.leader().url("/ui/cluster"), "#raft-servers")
	b.wait("3 clients over the servers", `[...document.querySelectorAll("#raft-servers td.clients")].reduce((s, td) => s + Number(td.textContent), 0) === 3`)

	// kill -9 of the client running a long job: rerun on another client.
	d := newJobDir(t, c.root)
	id = submitJob(t, leader, d.waitingJob("long", "kind == client"))
	j = waitJobState(t, leader, id, "running")
	victim := clientNamed(clients, j.attempt(1).Node)
	pid := d.pid(t, 1)
	killed := time.Now()
	victim.kill9()
	nodeDead := watchNodeDead(t, leader, victim.name, killed)
	deadAfter := waitDead(t, pid, killed)
	j, took := runningElsewhere(t, leader, id, victim.name, killed)
	reportRerun(t, "kill -9 of client "+victim.name, deadAfter, nodeDead(), took)
	if took < deadAfter-500*time.Millisecond {
		t.Errorf("invariant 2: the replacement ran %.1fs after kill -9 but the old copy died only at %.1fs", took.Seconds(), deadAfter.Seconds())
	}
	if a1 := j.attempt(1); a1.State != "lost" && !(a1.State == "killed" && a1.Reason == "fenced") {
		t.Errorf("attempt 1 on the dead client: %+v, want lost (or killed: fenced)", a1)
	}

	// kill -9 of the leader: the surviving client's job keeps running
	// under the new leader, then finishes. The new leader never declares
	// it lost (no false "lost"). When the election and the client's move
	// outlast its lease (6 s; on two loaded cores they can), the client
	// fences its own copy first and the job runs again once: said, not
	// failed, since no timing is promised under load; two live copies or a
	// lost attempt 2 fail.
	leader.kill9()
	leader = c.leader()
	d.release(t)
	j = waitJobState(t, leader, id, "succeeded")
	switch a2 := j.attempt(2); {
	case a2 == nil:
		t.Errorf("after the leader's kill: %s; attempt 2 is gone", j)
	case a2.State == "lost":
		t.Errorf("after the leader's kill: %s; attempt 2, on a live client, was declared lost", j)
	case j.Job.Attempts == 2:
	case j.Job.Attempts == 3 && a2.State == "killed" && a2.Reason == "fenced":
		t.Logf("after the leader's kill: the failover outlasted %s's lease, which fenced attempt 2; attempt 3 ran it: %s", a2.Node, j)
	default:
		t.Errorf("after the leader's kill: %s; want the job done by attempt 2 (or by 3 after attempt 2 fenced itself)", j)
	}
	for n := 2; n <= j.Job.Attempts; n++ {
		if runs := d.runs(n); len(runs) > 1 {
			t.Errorf("attempt %d executed %d times: %v", n, len(runs), runs)
		}
	}

	// A client stopped with SIGTERM says so: dead at once, not after
	// DeadAfter of silence.
	other := clients[0]
	if other == victim {
		other = clients[1]
	}
	// Once it is attached to a server the leader hears it through (its
	// health says so), as a running client is.
	eventually(t, systemTimeout, other.name+" in contact with the leader", func() error {
		var h struct {
			Server        string `json:"server"`
			LeaderContact bool   `json:"leader_contact"`
		}
		if err := getJSON(other.url("/v1/health"), &h); err != nil {
			return err
		}
		if !h.LeaderContact {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	other.term(t)
	for _, nd := range nodesOf(t, leader) {
		if nd.Name == other.name && nd.Gossip != "dead" {
			t.Errorf("%s stopped with SIGTERM is %s in the leader's state; want dead at once", nd.Name, nd.Gossip)
		}
	}

	// The killed client restarts with its data dir and registers again.
	victim.restart(t)
	eventually(t, systemTimeout, victim.name+" alive again", func() error {
		for _, nd := range nodesOf(t, leader) {
			if nd.Name == victim.name && nd.Gossip == "alive" {
				return nil
			}
		}
		return fmt.Errorf("%s not alive", victim.name)
	})

	// A rolling restart of every role (each server, then the client
	// running a long job, SIGTERM and start again): the job runs through
	// it once, its attempt never lost.
	d = newJobDir(t, c.root)
	id = submitJob(t, leader, d.waitingJob("through-restarts", "sysnode == "+victim.name))
	waitJobState(t, leader, id, "running")
	d.pid(t, 1)
	for _, s := range c.agents {
		if !s.running() {
			s.restart(t) // the leader killed above
			c.leader()
		}
		took := s.term(t)
		t.Logf("server %s stopped in %.1fs (its clients moved at once)", s.name, took.Seconds())
		if took > 12*time.Second {
			// The agent's shutdown gives up after 15 s: a server that
			// waited that long waited for its clients' streams to end.
			t.Errorf("server %s took %.1fs to stop: did it wait for its clients' streams?", s.name, took.Seconds())
		}
		s.restart(t)
		c.leader()
		c.waitConverged(c.others())
	}
	leader = c.leader()
	took = victim.term(t)
	t.Logf("client %s stopped in %.1fs", victim.name, took.Seconds())
	victim.restart(t)
	d.release(t)
	j = waitJobState(t, leader, id, "succeeded")
	if j.Job.Attempts != 1 || len(d.runs(1)) != 1 {
		t.Errorf("through the rolling restart: %s, runs %v; want one attempt, run once", j, d.runs(1))
	}
	// The client stopped with SIGTERM long before is still dead
	// (TestLeavingClientStaysDead checks no event revived it meanwhile).
	for _, nd := range nodesOf(t, leader) {
		if nd.Name == other.name && nd.Gossip != "dead" {
			t.Errorf("%s, stopped with SIGTERM, is %s now", nd.Name, nd.Gossip)
		}
	}

	// node down: refused for a raft member; a client an operator declared
	// dead that is in fact up and beating is committed alive again.
	if r := runForeman(t, c.bin, leader.url(""), "node", "down", leader.name); r.code == 0 || !strings.Contains(r.stderr, "raft member") {
		t.Errorf("node down %s (a server): exit %d %q, want a refusal naming a raft member", leader.name, r.code, r.stderr)
	}
	if r := runForeman(t, c.bin, leader.url(""), "node", "down", victim.name); r.code != 0 || !strings.Contains(r.stdout, "dead") {
		t.Fatalf("node down %s: exit %d %q %q", victim.name, r.code, r.stdout, r.stderr)
	}
	if err := poll(measureTimeout, func() error {
		for _, nd := range nodesOf(t, leader) {
			if nd.Name == victim.name && nd.Gossip != "alive" {
				return fmt.Errorf("%s is %s", nd.Name, nd.Gossip)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("a beating client declared down was not committed alive again: %v", err)
	}
	// The same from the Node page's button.
	b.open(leader.url("/ui/nodes/"+victim.name), `[data-action="down"]`)
	b.run("declare down", chromedp.Click(chromedp.CSS(`[data-action="down"]`)), chromedp.WaitVisible(`[data-confirm="yes"]`),
		chromedp.Click(chromedp.CSS(`[data-confirm="yes"]`)))
	b.wait("the API took it", `document.body.textContent.includes("`+victim.name+` declared down")`)
}

func clientNamed(clients []*agentProc, name string) *agentProc {
	for _, a := range clients {
		if a.name == name {
			return a
		}
	}
	panic("the job ran on " + name + ", not on a client")
}
