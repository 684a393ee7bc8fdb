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

// Client agents under --acl, started as the README says (only --join):
// c1, with a token of role client:c1 in --token-file, finds the voters all
// there and runs jobs as a client; a server reads its logs with the key it
// sent c1 over the stream (a new one after the internal secret rotates),
// and c1's port refuses anyone without that key, a user's token included. A token of another role makes a joining agent
// exit with the refusal; a client token for another node gets the stream
// refused, and that agent never registers.
func TestSystemACLClients(t *testing.T) {
	bin, root, servers, mgmt := newACLCluster(t)
	s0 := servers[0]
	token := func(role string) string {
		t.Helper()
		r := runForeman(t, bin, s0.url(""), "acl", "token", "create", "--token", mgmt, "--role", role, "--json")
		var tok struct {
			Secret string `json:"secret"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tok) != nil || tok.Secret == "" {
			t.Fatalf("token %s: exit %d %s %s", role, r.code, r.stdout, r.stderr)
		}
		return tok.Secret
	}
	if r := runForeman(t, bin, s0.url(""), "acl", "token", "create", "--token", mgmt, "--role", "client"); r.code == 0 || !strings.Contains(r.stderr, "client:NODE") {
		t.Errorf("--role client without a node: exit %d %q, want a refusal naming client:NODE", r.code, r.stderr)
	}
	prefix := s0.ip[:strings.LastIndex(s0.ip, ".")]
	var join []string
	for _, s := range servers {
		join = append(join, "--join", net.JoinHostPort(s.ip, fmt.Sprint(s.base)))
	}
	start := func(name, secret string, host int) *agentProc {
		t.Helper()
		file := filepath.Join(root, name+".token")
		if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"--acl", "--token-file", file, "--label", "sysnode=" + name, "--default-driver", "process"}, join...)
		return startAgentAt(t, bin, name, filepath.Join(root, name, "data"), fmt.Sprintf("%s.%d", prefix, host), s0.base, args...)
	}
	nodes := func() map[string]clientNode {
		var l struct {
			Nodes []clientNode `json:"nodes"`
		}
		_ = getJSONToken(s0.url("/v1/nodes?consistent=true"), mgmt, &l)
		out := map[string]clientNode{}
		for _, n := range l.Nodes {
			out[n.Name] = n
		}
		return out
	}

	c1 := start("c1", token("client:c1"), 11)
	eventually(t, systemTimeout, "c1 alive as a client", func() error {
		if n := nodes()["c1"]; n.Role != "client" || n.Gossip != "alive" {
			return fmt.Errorf("c1: %+v", n)
		}
		return nil
	})
	// run streams the job's output from c1 through a server.
	r := runForeman(t, bin, s0.url(""), "run", "--token", mgmt, "--driver", "process", "--constraint", "sysnode == c1",
		"--", "/bin/sh", "-c", "echo hello-from-$FOREMAN_NODE")
	if r.code != 0 || !strings.Contains(r.stdout, "hello-from-c1") {
		t.Fatalf("run on c1: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runForeman(t, bin, s0.url(""), "submit", "--token", mgmt, "--driver", "process", "--constraint", "sysnode == c1",
		"--", "/bin/sh", "-c", "echo hello-from-$FOREMAN_NODE")
	if r.code != 0 {
		t.Fatalf("submit to c1: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	eventually(t, systemTimeout, "the job's output", func() error {
		if lr := runForeman(t, bin, s0.url(""), "logs", "--token", mgmt, id); strings.TrimSpace(lr.stdout) != "hello-from-c1" {
			return fmt.Errorf("logs: exit %d %q %q", lr.code, lr.stdout, lr.stderr)
		}
		return nil
	})
	for _, s := range servers {
		if lr := runForeman(t, bin, s.url(""), "logs", "--token", mgmt, id); lr.code != 0 || strings.TrimSpace(lr.stdout) != "hello-from-c1" {
			t.Errorf("logs through %s: exit %d, stdout %q, stderr %q", s.name, lr.code, lr.stdout, lr.stderr)
		}
	}
	// The internal secret rotated: the servers present c1's new key, which
	// its stream brings it, and reads through them work again.
	if r := runForeman(t, bin, s0.url(""), "acl", "internal-secret", "rotate", "--token", mgmt); r.code != 0 {
		t.Fatalf("rotate: exit %d %s", r.code, r.stderr)
	}
	for _, s := range servers {
		eventually(t, systemTimeout, "logs through "+s.name+" after the rotation", func() error {
			if lr := runForeman(t, bin, s.url(""), "logs", "--token", mgmt, id); strings.TrimSpace(lr.stdout) != "hello-from-c1" {
				return fmt.Errorf("exit %d %q %q", lr.code, lr.stdout, lr.stderr)
			}
			return nil
		})
	}
	// c1's own port: only its servers, with the key they sent it.
	for _, secret := range []string{"", mgmt} {
		if code := status(t, "GET", c1.url("/v1/jobs/"+id+"/logs?attempt=1"), secret); code != http.StatusUnauthorized {
			t.Errorf("c1's port, with a token %v: %d, want 401", secret != "", code)
		}
	}

	// Another role's token: a joining agent cannot even ask whether to
	// be a client, and says why.
	bad := start("c2", token("read:*"), 12)
	eventually(t, systemTimeout, "c2 exits naming the refusal", func() error {
		b, _ := os.ReadFile(bad.logPath)
		if !strings.Contains(string(b), "refused") || !strings.Contains(string(b), "client:NAME") {
			return fmt.Errorf("c2's log: %s", b)
		}
		return nil
	})
	// c1's token used by an agent named c3: its stream is refused.
	c3 := start("c3", token("client:c9"), 13)
	eventually(t, systemTimeout, "c3's stream refused", func() error {
		b, _ := os.ReadFile(c3.logPath)
		if !strings.Contains(string(b), "refused this client's credential") || !strings.Contains(string(b), "client:c3 or client:*") {
			return fmt.Errorf("c3's log has no refusal naming client:c3 (its last bytes: %s)", b[max(0, len(b)-2000):])
		}
		return nil
	})
	for _, name := range []string{"c2", "c3"} {
		if n, ok := nodes()[name]; ok {
			t.Errorf("%s registered with a token that is not its own: %+v", name, n)
		}
	}
}
