package systest

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/certs"
)

// TestSystemTLSCluster runs the README's secure cluster with the real
// binary: certificates from `foreman tls`, three agents with HTTPS, mutual
// TLS between them and an encrypted gossip; jobs run and their logs are
// proxied across nodes over TLS; plain HTTP gets a clear 400; a CLI without
// the CA refuses the agent; SIGHUP swaps the served certificate.
func TestSystemTLSCluster(t *testing.T) {
	bin := foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	pki := filepath.Join(root, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	tlsCLI := func(args ...string) string {
		t.Helper()
		r := runForeman(t, bin, "", append([]string{"tls"}, args...)...)
		if r.code != 0 {
			t.Fatalf("foreman tls %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	ca := filepath.Join(pki, "foreman-ca.pem")
	tlsCLI("ca", "create", "--dir", pki)
	caFlags := []string{"--ca", ca, "--ca-key", filepath.Join(pki, "foreman-ca-key.pem"), "--dir", pki}
	for _, n := range []string{"n1", "n2", "n3"} {
		tlsCLI(append([]string{"cert", "create", "--server", "--node", n}, caFlags...)...)
	}
	key := strings.TrimSpace(tlsCLI("gossip-key"))

	var agents []*agentProc
	var bases []int
	for i, name := range []string{"n1", "n2", "n3"} {
		base := freeBase(t)
		for slicesContainsNear(bases, base) {
			base = freeBase(t)
		}
		bases = append(bases, base)
		args := []string{"--bootstrap-expect", "3", "--label", "sysnode=" + name, "--default-driver", "process",
			"--tls-cert", filepath.Join(pki, name+"-server.pem"), "--tls-key", filepath.Join(pki, name+"-server-key.pem"),
			"--tls-ca", ca, "--gossip-key", key}
		if i > 0 {
			args = append(args, "--join", fmt.Sprintf("127.0.0.1:%d", bases[0]))
		}
		agents = append(agents, startAgent(t, bin, name, filepath.Join(root, name, "data"), base, args...))
	}
	addr := func(a *agentProc) string { return fmt.Sprintf("https://127.0.0.1:%d", a.base) }
	clientCfg, err := certs.ClientConfig(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientCfg}}
	eventually(t, systemTimeout, "three nodes ready over https", func() error {
		for _, a := range agents {
			resp, err := hc.Get(addr(a) + "/v1/ready")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %d", a.name, resp.StatusCode)
			}
		}
		return nil
	})

	eventually(t, systemTimeout, "three nodes registered alive", func() error {
		r := runForeman(t, bin, addr(agents[0]), "node", "ls", "--ca-cert", ca)
		if r.code != 0 || strings.Count(r.stdout, " alive ") != 3 {
			return fmt.Errorf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		return nil
	})

	run := func(via *agentProc, on, word string) {
		t.Helper()
		r := runForeman(t, bin, addr(via), "run", "--ca-cert", ca, "--constraint", "sysnode == "+on, "--", "echo", word)
		if r.code != 0 || !strings.Contains(r.stdout, word) {
			t.Fatalf("run on %s via %s: exit %d, stdout %q, stderr %q", on, via.name, r.code, r.stdout, r.stderr)
		}
	}
	t.Run("jobs run and logs are proxied between nodes", func(t *testing.T) {
		run(agents[0], "n3", "hello-from-n3")
		run(agents[2], "n1", "hello-from-n1")
		run(agents[1], "n2", "hello-from-n2")
	})
	t.Run("plain HTTP to the TLS port", func(t *testing.T) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/jobs", agents[0].base))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "HTTPS server") {
			t.Fatalf("got %d %q", resp.StatusCode, b)
		}
	})
	t.Run("the CLI refuses an agent it cannot verify", func(t *testing.T) {
		r := runForeman(t, bin, addr(agents[0]), "job", "ls")
		if r.code == 0 || !strings.Contains(r.stderr, "certificate") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Fatalf("exit %d, stderr %q; want one line about the certificate", r.code, r.stderr)
		}
	})
	t.Run("SIGHUP reloads the certificate", func(t *testing.T) {
		a := agents[0]
		served := func() (string, error) {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", a.base), clientCfg)
			if err != nil {
				return "", err
			}
			defer c.Close()
			return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
		}
		before, err := served()
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(pki, "n1-server.pem"))
		os.Remove(filepath.Join(pki, "n1-server-key.pem"))
		tlsCLI(append([]string{"cert", "create", "--server", "--node", "n1"}, caFlags...)...)
		if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		eventually(t, systemTimeout, "a new certificate served", func() error {
			after, err := served()
			if err != nil {
				return err
			}
			if after == before {
				return fmt.Errorf("still serial %s", before)
			}
			return nil
		})
		if !a.running() {
			t.Fatal("the agent exited on SIGHUP")
		}
		run(agents[1], "n1", "after-reload") // raft and proxies still work
	})
}

// slicesContainsNear says whether base's three ports overlap a base in list.
func slicesContainsNear(list []int, base int) bool {
	for _, b := range list {
		if base > b-3 && base < b+3 {
			return true
		}
	}
	return false
}
