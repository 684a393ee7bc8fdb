package systest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
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

// TestSystemUnreachableDataDir: a root agent whose data dir sits under a
// 0700 dir (what mktemp -d makes) says at start that its process jobs, run
// as nobody, cannot reach it, and does not offer the process driver: a
// process job waits with the reason instead of failing attempt after
// attempt. An agent whose default driver would be process refuses to
// start, naming the dir and the fix.
func TestSystemUnreachableDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (switching users)")
		}
		t.Skip("SKIPPED LOUDLY: needs root (switching users)")
	}
	bin := foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-") // 0700, left so
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	dir := filepath.Join(root, "data") // --data-dir $(mktemp -d)/data
	base := freeBase(t)
	args := []string{"agent", "--dev", "--port", fmt.Sprint(base), "--data-dir", dir}

	t.Run("process as the default driver is refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), systemTimeout) // an agent that starts would run on
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append(args, "--default-driver", "process")...).CombinedOutput()
		if err == nil || ctx.Err() != nil || !strings.Contains(string(out), root+" is not searchable") ||
			!strings.Contains(string(out), "chmod o+x "+root) || !strings.Contains(string(out), `"nobody"`) {
			t.Fatalf("agent --default-driver process: %v (ctx %v)\n%s\nwant a refusal naming %s, nobody and chmod o+x", err, ctx.Err(), out, root)
		}
	})

	// Explicitly container (CI has it), so the start does not depend on
	// what this host can run.
	a := &agentProc{name: "dev", dir: dir, base: base, bin: bin, logPath: filepath.Join(root, "dev.log"),
		args: append(args, "--default-driver", "container")}
	a.start(t)
	t.Cleanup(func() {
		a.stop9()
		if t.Failed() {
			b, _ := os.ReadFile(a.logPath)
			t.Logf("--- dev log ---\n%s", tail(string(b), 6000))
		}
	})
	addr := fmt.Sprintf("http://127.0.0.1:%d", base)
	cli := func(args ...string) cliResult {
		t.Helper()
		return runForeman(t, bin, addr, args...)
	}
	var nodes httpapi.NodeList
	eventually(t, systemTimeout, "dev agent ready", func() error {
		r := cli("node", "ls", "--json")
		if r.code != 0 {
			return fmt.Errorf("exit %d %s", r.code, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), &nodes); err != nil || len(nodes.Nodes) != 1 || nodes.Nodes[0].Gossip != fsm.NodeAlive {
			return fmt.Errorf("%v: %s", err, r.stdout)
		}
		return nil
	})
	if d := nodes.Nodes[0].Drivers; slices.Contains(d, "process") || !slices.Contains(d, "container") {
		t.Errorf("drivers %v: want container and no process", d)
	}
	// The worker is made before the API serves: its warning is written.
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		t.Fatal(err)
	}
	var warning string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "process jobs cannot run") {
			warning = l
		}
	}
	if !strings.Contains(warning, "user=nobody") || !strings.Contains(warning, "dir="+root) || !strings.Contains(warning, "chmod o+x "+root) {
		t.Errorf("start warning %q: want one naming user nobody, %s and chmod o+x", warning, root)
	}

	r := cli("submit", "--driver", "process", "--", "true")
	if r.code != 0 {
		t.Fatalf("submit: exit %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	var st httpapi.JobDetail
	eventually(t, systemTimeout, "the process job's reason", func() error {
		if err := json.Unmarshal([]byte(cli("job", "status", id, "--json").stdout), &st); err != nil {
			return err
		}
		if !strings.Contains(st.Job.Reason, "driver process unavailable") {
			return fmt.Errorf("%s: %q", st.Job.State, st.Job.Reason)
		}
		return nil
	})
	if st.Job.State != fsm.JobQueued || len(st.Attempts) != 0 {
		t.Errorf("process job %s with %d attempts (%q); want queued with none", st.Job.State, len(st.Attempts), st.Job.Reason)
	}
}
