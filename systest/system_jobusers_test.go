package systest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemJobIsolation checks who a job runs as and what it can see, on a
// TLS-enabled dev agent with the default --job-users/--job-default-user:
// a process job runs as nobody and cannot read the agent's TLS key or list
// its data dir; a job asking for root is refused with a clear reason; a
// container job sees neither the data dir nor the TLS files at all.
func TestSystemJobIsolation(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (switching users, containers)")
		}
		t.Skip("SKIPPED LOUDLY: needs root (switching users, containers)")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("user nobody: %v", err)
	}
	bin := foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	// Like /var/lib: the data dir's parents are searchable (MkdirTemp makes 0700).
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatal(err)
	}
	pki := filepath.Join(root, "pki")
	os.MkdirAll(pki, 0o700)
	for _, args := range [][]string{
		{"tls", "ca", "create", "--dir", pki},
		{"tls", "cert", "create", "--server", "--node", "dev", "--dir", pki, "--ca", filepath.Join(pki, "foreman-ca.pem"), "--ca-key", filepath.Join(pki, "foreman-ca-key.pem")},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("foreman %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	key := filepath.Join(pki, "dev-server-key.pem")
	ca := filepath.Join(pki, "foreman-ca.pem")
	base := freeBase(t)
	dir := filepath.Join(root, "dev", "data")
	a := &agentProc{name: "dev", dir: dir, base: base, bin: bin, logPath: filepath.Join(root, "dev", "dev.log"),
		args: []string{"agent", "--dev", "--port", fmt.Sprint(base), "--data-dir", dir, "--default-driver", "process",
			"--tls-cert", filepath.Join(pki, "dev-server.pem"), "--tls-key", key, "--tls-ca", ca}}
	a.start(t)
	t.Cleanup(func() {
		a.stop9()
		if t.Failed() {
			b, _ := os.ReadFile(a.logPath)
			t.Logf("--- dev log ---\n%s", tail(string(b), 6000))
		}
	})
	addr := fmt.Sprintf("https://127.0.0.1:%d", base)
	t.Setenv("FOREMAN_CACERT", ca) // the CLI runs below inherit it
	cli := func(args ...string) cliResult {
		t.Helper()
		return runForeman(t, bin, addr, args...)
	}
	eventually(t, systemTimeout, "dev agent ready", func() error {
		if r := cli("node", "ls"); r.code != 0 || !strings.Contains(r.stdout, "alive") {
			return fmt.Errorf("exit %d %s%s", r.code, r.stdout, r.stderr)
		}
		return nil
	})

	t.Run("process jobs run as nobody", func(t *testing.T) {
		r := cli("run", "--", "id", "-u")
		if r.code != 0 || strings.TrimSpace(r.stdout) != nobody.Uid {
			t.Fatalf("id -u: exit %d, stdout %q (want %s), stderr %q", r.code, r.stdout, nobody.Uid, r.stderr)
		}
		// Writing in the work dir works (it is handed to the job's user).
		if r := cli("run", "--", "sh", "-c", "echo x > f && cat f"); r.code != 0 || strings.TrimSpace(r.stdout) != "x" {
			t.Fatalf("write in the work dir: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		r = cli("run", "--", "sh", "-c", "cat "+key+" >/dev/null && echo KEY-READ; ls "+dir+" >/dev/null && echo DATA-LISTED; true")
		if r.code != 0 || strings.Contains(r.stdout, "KEY-READ") || strings.Contains(r.stdout, "DATA-LISTED") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want neither the key nor the data dir", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("root is refused", func(t *testing.T) {
		r := cli("run", "--user", "root", "--", "id", "-u")
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "not allowed") {
			t.Fatalf("run as root: exit %d, stdout %q, stderr %q; want a failure naming the allow-list", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("container jobs cannot see the agent's files", func(t *testing.T) {
		probe := fmt.Sprintf("for p in %s %s %s %s; do if [ -e $p ]; then echo VISIBLE $p; fi; done; cat /etc/shadow >/dev/null 2>&1 && echo SHADOW; true",
			dir, key, pki, filepath.Join(dir, "raft.db"))
		r := cli("run", "--driver", "container", "--", "/bin/sh", "-c", probe)
		if r.code != 0 || strings.Contains(r.stdout, "VISIBLE") || strings.Contains(r.stdout, "SHADOW") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want nothing of the agent visible", r.code, r.stdout, r.stderr)
		}
	})
}
