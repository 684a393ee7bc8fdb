package cli_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/certs"
	"github.com/foreman-sched/foreman/cli"
)

func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	runApp(t, "tls", "ca", "create", "--dir", dir)
	ca, caKey := filepath.Join(dir, "foreman-ca.pem"), filepath.Join(dir, "foreman-ca-key.pem")
	out := runApp(t, "tls", "cert", "create", "--server", "--node", "n1", "--ip", "10.0.0.1", "--dns", "foreman.example",
		"--ca", ca, "--ca-key", caKey, "--dir", dir)
	if !strings.Contains(out, "n1-server.pem") {
		t.Fatalf("output: %s", out)
	}
	runApp(t, "tls", "cert", "create", "--client", "--node", "alice", "--ca", ca, "--ca-key", caKey, "--dir", dir, "--json")

	s, err := certs.Load(certs.Files{CA: ca, Cert: filepath.Join(dir, "n1-server.pem"), Key: filepath.Join(dir, "n1-server-key.pem")})
	if err != nil {
		t.Fatal(err)
	}
	leaf := s.Leaf()
	if !certs.IsServer(leaf) || leaf.IPAddresses[0].String() != "10.0.0.1" || !strings.Contains(strings.Join(leaf.DNSNames, ","), "foreman.example") {
		t.Fatalf("server cert: ips %v names %v", leaf.IPAddresses, leaf.DNSNames)
	}
	st, err := os.Stat(filepath.Join(dir, "alice-client-key.pem"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("client key: %v %v", st, err)
	}

	key := strings.TrimSpace(runApp(t, "tls", "gossip-key"))
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 32 {
		t.Fatalf("gossip key %q: %d bytes, %v", key, len(b), err)
	}

	for _, bad := range [][]string{
		{"tls", "cert", "create", "--node", "x", "--ca", ca, "--ca-key", caKey, "--dir", dir},                             // neither role
		{"tls", "cert", "create", "--server", "--client", "--node", "x", "--ca", ca, "--ca-key", caKey, "--dir", dir},     // both
		{"tls", "cert", "create", "--server", "--ca", ca, "--ca-key", caKey, "--dir", dir},                                // no node
		{"tls", "cert", "create", "--server", "--node", "n1", "--ca", ca, "--ca-key", caKey, "--dir", dir},                // exists
		{"tls", "cert", "create", "--server", "--node", "x", "--ip", "nope", "--ca", ca, "--ca-key", caKey, "--dir", dir}, // bad ip
		{"tls", "cert", "create", "--server", "--node", "x", "--dir", dir},                                                // no CA here
		{"tls", "ca", "create", "--dir", dir},                                                                             // exists
	} {
		app := newApp()
		var buf bytes.Buffer
		app.Writer, app.ErrWriter = &buf, &buf
		if err := cli.Run(context.Background(), app, append([]string{"foreman"}, bad...)); err == nil {
			t.Errorf("foreman %s: succeeded", strings.Join(bad, " "))
		}
	}
}
