package systest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// secureCluster is three agents with ACL and TLS on (HTTPS, mutual TLS
// between agents, encrypted gossip), certificates made with `foreman tls`.
type secureCluster struct {
	bin, root, ca, gossipKey, mgmt string
	agents                         []*agentProc
}

func (c *secureCluster) addr(a *agentProc) string { return fmt.Sprintf("https://127.0.0.1:%d", a.base) }

// cli runs the foreman CLI against agent a with the CA and the management
// token.
func (c *secureCluster) cli(t testing.TB, a *agentProc, args ...string) cliResult {
	t.Helper()
	return runForeman(t, c.bin, c.addr(a), append(args, "--ca-cert", c.ca, "--token", c.mgmt)...)
}

// cliStdin is cli with stdin.
func (c *secureCluster) cliStdin(t testing.TB, a *agentProc, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(args, "--ca-cert", c.ca, "--token", c.mgmt)...)
	cmd.Env = append(os.Environ(), "FOREMAN_ADDR="+c.addr(a))
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("foreman %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// client is an API client of agent a with token.
func (c *secureCluster) client(t testing.TB, a *agentProc, token string) *api.Client {
	t.Helper()
	return apiClient(t, c.addr(a), cli.ClientConfig{CACert: c.ca, Token: token})
}

// newSecureCluster starts it and bootstraps the management token. Node i
// carries the label host=i+1.
func newSecureCluster(t *testing.T) *secureCluster {
	t.Helper()
	c := &secureCluster{bin: foremanBin(t)}
	root, err := os.MkdirTemp("", "foreman-systest-sec-")
	if err != nil {
		t.Fatal(err)
	}
	c.root = root
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	pki := filepath.Join(root, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	tlsCLI := func(args ...string) string {
		t.Helper()
		r := runForeman(t, c.bin, "", append([]string{"tls"}, args...)...)
		if r.code != 0 {
			t.Fatalf("foreman tls %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	c.ca = filepath.Join(pki, "foreman-ca.pem")
	tlsCLI("ca", "create", "--dir", pki)
	names := []string{"s1", "s2", "s3"}
	for _, n := range names {
		tlsCLI("cert", "create", "--server", "--node", n, "--ca", c.ca, "--ca-key", filepath.Join(pki, "foreman-ca-key.pem"), "--dir", pki)
	}
	c.gossipKey = strings.TrimSpace(tlsCLI("gossip-key"))
	var bases []int
	for i, name := range names {
		base := freeBase(t)
		for slicesContainsNear(bases, base) {
			base = freeBase(t)
		}
		bases = append(bases, base)
		args := []string{"--acl", "--bootstrap-expect", "3", "--label", fmt.Sprintf("host=%d", i+1), "--default-driver", "process",
			"--tls-cert", filepath.Join(pki, name+"-server.pem"), "--tls-key", filepath.Join(pki, name+"-server-key.pem"),
			"--tls-ca", c.ca, "--gossip-key", c.gossipKey}
		if i > 0 {
			args = append(args, "--join", fmt.Sprintf("127.0.0.1:%d", bases[0]))
		}
		c.agents = append(c.agents, startAgent(t, c.bin, name, filepath.Join(root, name, "data"), base, args...))
	}
	eventually(t, systemTimeout, "ACL bootstrap", func() error {
		r := runForeman(t, c.bin, c.addr(c.agents[0]), "acl", "bootstrap", "--json", "--ca-cert", c.ca)
		if r.code != 0 {
			return fmt.Errorf("exit %d: %s", r.code, r.stderr)
		}
		var out struct{ Secret string }
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Secret == "" {
			return fmt.Errorf("bootstrap output %q: %v", r.stdout, err)
		}
		c.mgmt = out.Secret
		return nil
	})
	eventually(t, systemTimeout, "three nodes alive", func() error {
		r := c.cli(t, c.agents[0], "node", "ls")
		if r.code != 0 || strings.Count(r.stdout, " alive ") != 3 {
			return fmt.Errorf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		return nil
	})
	return c
}

// token creates a token with role ("write:default"...) and returns its secret.
func (c *secureCluster) token(t *testing.T, role string) string {
	t.Helper()
	r := c.cli(t, c.agents[1], "acl", "token", "create", "--role", role, "--name", role, "--json")
	if r.code != 0 {
		t.Fatalf("token create %s: %d %s", role, r.code, r.stderr)
	}
	var tok struct{ Secret string }
	if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil || tok.Secret == "" {
		t.Fatalf("token create output %q: %v", r.stdout, err)
	}
	return tok.Secret
}

// TestSystemSecureArtifacts: with ACL and TLS on, a child on another node
// gets its parent's artifact. The child's node fetches it from the
// parent's node over /v1/internal/artifacts/ with the cluster-internal
// secret and its agent certificate (it once used the API route with no
// token: 401 under ACL, and plain HTTP: refused by an HTTPS agent). No
// user token is in the agents' environment.
func TestSystemSecureArtifacts(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	c := newSecureCluster(t)
	// A rotated cluster-internal secret: followers forward the submit and
	// the child's node fetches the artifact with the new one.
	if r := c.cli(t, c.agents[1], "acl", "internal-secret", "rotate"); r.code != 0 || !strings.Contains(r.stdout, "rotated") {
		t.Fatalf("internal-secret rotate: %d %s %s", r.code, r.stdout, r.stderr)
	}
	cl := c.client(t, c.agents[2], c.token(t, "write:default"))
	one := 1
	job := func(name, host, script string, deps ...string) httpapi.JobSpecInput {
		return httpapi.JobSpecInput{Name: name, Command: httpapi.JSONString(script), Driver: "process", MaxAttempts: &one,
			Constraints: []string{"host == " + host}, DependsOn: deps}
	}
	wf := httpapi.WorkflowInput{Name: "secure-artifacts", Jobs: []httpapi.JobSpecInput{
		job("a", "1", `mkdir -p "$FOREMAN_ARTIFACTS/out" && printf "artifact-of-a" > "$FOREMAN_ARTIFACTS/out/data.txt"`),
		job("b", "2", `printf "%s on $FOREMAN_NODE" "$(cat "$FOREMAN_INPUTS/a/artifacts/out/data.txt")" > "$FOREMAN_RESULT"`, "a"),
	}}
	ctx := context.Background()
	var sub *api.WorkflowSubmitResponse
	eventually(t, systemTimeout, "submit the workflow", func() error {
		var err error
		sub, err = submitWorkflow(ctx, cl, wf)
		return err
	})
	var d *httpapi.WorkflowDetail
	eventually(t, systemTimeout, "workflow ends", func() error {
		var err error
		if d, err = workflowAll(ctx, cl, sub.ID); err != nil {
			return err
		}
		if d.State != fsm.WorkflowSucceeded && d.State != fsm.WorkflowFailed {
			return fmt.Errorf("workflow is %s", d.State)
		}
		return nil
	})
	var b httpapi.WorkflowJobStatus
	for _, j := range d.JobList {
		if j.Name == "b" {
			b = j
		}
	}
	if d.State != fsm.WorkflowSucceeded {
		t.Fatalf("workflow %s: %+v", d.State, d.JobList)
	}
	res, err := cl.JobResult(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res); got != "artifact-of-a on s2" {
		t.Errorf("b's result %q, want the artifact read on s2", got)
	}
}

// TestSystemGossipKeyRotation rotates the gossip key of three agents
// (ACL and TLS on) with `foreman operator gossip-key install|use|remove`
// while every agent watches the membership: no member is ever suspect or
// dead, no agent logs a packet it could not decrypt, a use before the key
// is installed everywhere and a remove of the primary key are refused, and
// an agent restarted with its old --gossip-key rejoins with the rotated
// keyring it saved in its data dir.
func TestSystemGossipKeyRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	c := newSecureCluster(t)
	keys := func(via *agentProc) map[string]string { // node -> "fp fp*"
		t.Helper()
		r := c.cli(t, via, "operator", "gossip-key", "list", "--json")
		if r.code != 0 {
			t.Fatalf("gossip-key list: %d %s", r.code, r.stderr)
		}
		var res httpapi.GossipKeysResponse
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, n := range res.Nodes {
			var ks []string
			for _, k := range n.Keys {
				ks = append(ks, k.Fingerprint+map[bool]string{true: "*"}[k.Primary])
			}
			out[n.Node] = strings.Join(ks, " ")
		}
		return out
	}
	fp := func(b64 string) string {
		k, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		return cluster.KeyFingerprint(k)
	}
	want := func(got map[string]string, w string) {
		t.Helper()
		if len(got) != 3 {
			t.Fatalf("keyrings of %d nodes, want 3: %v", len(got), got)
		}
		for n, k := range got {
			if k != w {
				t.Fatalf("%s: keys %q, want %q (all: %v)", n, k, w, got)
			}
		}
	}
	old := c.gossipKey
	want(keys(c.agents[0]), fp(old)+"*")

	// Every agent's view of the membership, twice a second, until the end.
	stop := make(chan struct{})
	watchErr := make(chan string, 1)
	var rounds atomic.Int64
	go func() {
		defer close(watchErr)
		cls := []*api.Client{}
		for _, a := range c.agents {
			cls = append(cls, c.client(t, a, c.mgmt))
		}
		for {
			for i, cl := range cls {
				ms, err := cl.Members(context.Background())
				if err != nil {
					continue // an agent restarting below
				}
				for _, m := range ms {
					if m.Status != string(fsm.NodeAlive) && c.agents[i].running() {
						select {
						case watchErr <- fmt.Sprintf("%s sees %s %s", c.agents[i].name, m.Name, m.Status):
						default:
						}
					}
				}
			}
			rounds.Add(1)
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()

	nk := runForeman(t, c.bin, "", "tls", "gossip-key")
	stray := runForeman(t, c.bin, "", "tls", "gossip-key")
	newKey, strayKey := strings.TrimSpace(nk.stdout), strings.TrimSpace(stray.stdout)
	if r := c.cli(t, c.agents[1], "operator", "gossip-key", "use", strayKey); r.code == 0 || !strings.Contains(r.stderr, "not installed") {
		t.Errorf("use of a key installed nowhere: exit %d %q; want a refusal", r.code, r.stderr)
	}
	// docs/security.md's form: the key from stdin (out of ps).
	if r := c.cliStdin(t, c.agents[1], newKey+"\n", "operator", "gossip-key", "install", "-"); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	want(keys(c.agents[2]), fp(old)+"* "+fp(newKey))
	if r := c.cliStdin(t, c.agents[2], newKey+"\n", "operator", "gossip-key", "use", "-"); r.code != 0 {
		t.Fatalf("use: %d %s", r.code, r.stderr)
	}
	if r := c.cli(t, c.agents[0], "operator", "gossip-key", "remove", newKey); r.code == 0 || !strings.Contains(r.stderr, "primary") {
		t.Errorf("remove of the primary key: exit %d %q; want a refusal", r.code, r.stderr)
	}
	if r := c.cli(t, c.agents[0], "operator", "gossip-key", "remove", old); r.code != 0 {
		t.Fatalf("remove: %d %s", r.code, r.stderr)
	}
	want(keys(c.agents[1]), fp(newKey)+"*")

	// Gossip keeps flowing on the new key only: watch ten more rounds
	// (about 3 s: three probe intervals; a member that could not decrypt
	// would turn suspect within them), then stop watching.
	target := rounds.Load() + 10
	eventually(t, systemTimeout, "ten membership rounds after the rotation", func() error {
		if r := rounds.Load(); r < target {
			return fmt.Errorf("%d rounds", r)
		}
		return nil
	})
	close(stop)
	for msg := range watchErr {
		t.Errorf("membership changed during the rotation: %s", msg)
	}

	// Restart one agent with its old --gossip-key: the saved keyring wins.
	a := c.agents[2]
	a.kill9()
	a.restart(t)
	eventually(t, systemTimeout, a.name+" back and alive on every node's view", func() error {
		for _, via := range c.agents {
			ms, err := c.client(t, via, c.mgmt).Members(context.Background())
			if err != nil {
				return err
			}
			alive := 0
			for _, m := range ms {
				if m.Status == string(fsm.NodeAlive) {
					alive++
				}
			}
			if alive != 3 {
				return fmt.Errorf("%s sees %d alive: %+v", via.name, alive, ms)
			}
		}
		return nil
	})
	want(keys(c.agents[0]), fp(newKey)+"*")
	for _, a := range c.agents {
		b, _ := os.ReadFile(a.logPath)
		if strings.Contains(string(b), "No installed keys could decrypt") {
			t.Errorf("%s logged gossip it could not decrypt during the rotation", a.name)
		}
		// What the agent wrote (the helper's "=== … start" lines hold the
		// test's own argv, with the first key).
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "=== ") {
				continue
			}
			for _, k := range []string{old, newKey} {
				if strings.Contains(line, k) {
					t.Errorf("%s's log holds a gossip key: %s", a.name, line)
				}
			}
		}
	}
}
