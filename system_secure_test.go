package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// client is an API client of agent a with token.
func (c *secureCluster) client(t testing.TB, a *agentProc, token string) *httpapi.Client {
	t.Helper()
	cl, err := httpapi.NewClient(c.addr(a), httpapi.ClientOptions{CACert: c.ca, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return cl
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
	var sub *httpapi.WorkflowSubmitResponse
	eventually(t, systemTimeout, "submit the workflow", func() error {
		var err error
		sub, err = cl.SubmitWorkflow(ctx, wf)
		return err
	})
	var d *httpapi.WorkflowDetail
	eventually(t, systemTimeout, "workflow ends", func() error {
		var err error
		if d, err = cl.GetWorkflowAll(ctx, sub.ID, false); err != nil {
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
	res, err := cl.JobResult(ctx, b.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res); got != "artifact-of-a on s2" {
		t.Errorf("b's result %q, want the artifact read on s2", got)
	}
}
