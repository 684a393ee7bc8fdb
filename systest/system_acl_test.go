package systest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newACLCluster starts three servers with --acl on one subnet, waits
// until each is ready, and bootstraps the ACL through a follower: the
// binary, the root dir, the agents and the management secret.
func newACLCluster(t *testing.T) (bin, root string, agents []*agentProc, mgmtSecret string) {
	t.Helper()
	bin = foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-acl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); _ = os.RemoveAll(root) })
	net24 := subnet()
	ips := []string{net24 + ".1", net24 + ".2", net24 + ".3"}
	base := freeBaseOn(t, ips...)
	for i, ip := range ips {
		name := fmt.Sprintf("acl%d", i+1)
		args := []string{"--acl", "--bootstrap-expect", "3", "--default-driver", "process"}
		if i > 0 {
			args = append(args, "--join", net.JoinHostPort(ips[0], fmt.Sprint(base)))
		}
		agents = append(agents, startAgentAt(t, bin, name, filepath.Join(root, name, "data"), ip, base, args...))
	}
	for _, a := range agents {
		eventually(t, systemTimeout, a.name+" ready (open without a token)", func() error {
			resp, err := http.Get(a.url("/v1/ready"))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("ready: %d", resp.StatusCode)
			}
			return nil
		})
	}
	if code := status(t, "GET", agents[0].url("/v1/nodes"), ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/nodes without a token: %d, want 401", code)
	}
	// Find a follower: the raft route needs a token, so ask after bootstrap.
	addr := func(a *agentProc) string { return a.url("") }
	boot := runForeman(t, bin, addr(agents[1]), "acl", "bootstrap", "--json")
	if boot.code != 0 {
		t.Fatalf("bootstrap: %d %s", boot.code, boot.stderr)
	}
	var mgmt struct {
		Secret     string `json:"secret"`
		AccessorID string `json:"accessor_id"`
	}
	if err := json.Unmarshal([]byte(boot.stdout), &mgmt); err != nil || !strings.HasPrefix(mgmt.Secret, "fmn_") {
		t.Fatalf("bootstrap output %q: %v", boot.stdout, err)
	}
	if again := runForeman(t, bin, addr(agents[2]), "acl", "bootstrap"); again.code == 0 || !strings.Contains(again.stderr, "already bootstrapped") {
		t.Errorf("second bootstrap: exit %d, stderr %q; want a refusal saying it was already bootstrapped", again.code, again.stderr)
	}
	return bin, root, agents, mgmt.Secret
}

// TestSystemACL runs three real agents with --acl: bootstrap through a
// follower (once), tokens per namespace from the CLI, submits from a
// follower (grouped forwarding and every executor report then need the
// cluster-internal secret), 401 and 403 where they belong.
func TestSystemACL(t *testing.T) {
	bin, _, agents, secret := newACLCluster(t)
	mgmt := struct{ Secret string }{secret}
	addr := func(a *agentProc) string { return a.url("") }
	var leader string
	eventually(t, systemTimeout, "leader known", func() error {
		var rv raftView
		if err := getJSONToken(agents[0].url("/v1/cluster/raft"), mgmt.Secret, &rv); err != nil {
			return err
		}
		if rv.Leader == "" {
			return fmt.Errorf("no leader")
		}
		leader = rv.Leader
		return nil
	})
	var follower *agentProc
	for _, a := range agents {
		if a.name != leader {
			follower = a
			break
		}
	}
	token := func(role string) string {
		t.Helper()
		r := runForeman(t, bin, addr(follower), "acl", "token", "create", "--token", mgmt.Secret, "--role", role, "--name", role, "--json")
		if r.code != 0 {
			t.Fatalf("token create %s: %d %s", role, r.code, r.stderr)
		}
		var tok struct {
			Secret     string `json:"secret"`
			AccessorID string `json:"accessor_id"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil {
			t.Fatal(err)
		}
		return tok.Secret + " " + tok.AccessorID
	}
	subA, subAID, _ := strings.Cut(token("submit:a"), " ")
	readA, _, _ := strings.Cut(token("read:a"), " ")

	// Submit in a from the follower; the job must run and report back.
	r := runForeman(t, bin, addr(follower), "submit", "--token", subA, "--namespace", "a", "--", "true")
	if r.code != 0 {
		t.Fatalf("submit in a: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	eventually(t, systemTimeout, "job in a succeeds", func() error {
		var j jobView
		if err := getJSONToken(follower.url("/v1/jobs/"+id), readA, &j); err != nil {
			return err
		}
		if j.Job.State != "succeeded" {
			return fmt.Errorf("state %s", j.Job.State)
		}
		return nil
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"submit token in b", []string{"submit", "--token", subA, "--namespace", "b", "--", "true"}, `submit permission on namespace "b"`},
		{"read token submits", []string{"submit", "--token", readA, "--namespace", "a", "--", "true"}, "submit permission"},
		{"no token", []string{"submit", "--namespace", "a", "--", "true"}, "no token"},
	} {
		r := runForeman(t, bin, addr(follower), tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want a failure containing %q", tc.name, r.code, r.stderr, tc.want)
		}
	}
	if code := status(t, "GET", follower.url("/v1/jobs/"+id), subA); code != http.StatusOK {
		t.Errorf("submit-a reads its job: %d", code)
	}
	if code := status(t, "GET", follower.url("/v1/jobs?namespace=b"), readA); code != http.StatusForbidden {
		t.Errorf("read-a lists b: %d, want 403", code)
	}
	if r := runForeman(t, bin, addr(follower), "acl", "token", "revoke", "--token", mgmt.Secret, subAID); r.code != 0 {
		t.Fatalf("revoke: %d %s", r.code, r.stderr)
	}
	eventually(t, systemTimeout, "revoked token refused on every node", func() error {
		for _, a := range agents {
			if code := status(t, "GET", a.url("/v1/jobs?namespace=a"), subA); code != http.StatusUnauthorized {
				return fmt.Errorf("%s: %d", a.name, code)
			}
		}
		return nil
	})
	// Secrets never reach the agents' logs.
	for _, a := range agents {
		b, _ := os.ReadFile(a.logPath)
		for _, s := range []string{mgmt.Secret, subA, readA} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s's log holds a token secret", a.name)
			}
		}
	}
}

func status(t testing.TB, method, url, secret string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getJSONToken(url, secret string, v any) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
