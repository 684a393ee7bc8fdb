package agent

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
)

// --role auto without the network: the first servers and --acl agents are
// servers; only a fresh agent that just --joins asks.
func TestAutoRoleWithoutAsking(t *testing.T) {
	join := []string{"10.0.0.1"}
	for _, c := range []struct {
		dev, acl bool
		expect   int
		join     []string
		want     string
	}{
		{dev: true, want: RoleServer},
		{want: RoleServer}, // no --join: a single server bootstrapping
		{expect: 3, join: join, want: RoleServer},
		{acl: true, join: join, want: RoleServer},
		{join: join, want: ""},
	} {
		if got := autoRoleWithoutAsking(c.dev, c.acl, c.expect, c.join); got != c.want {
			t.Errorf("%+v: %q, want %q", c, got, c.want)
		}
	}
}

// resolveRole keeps its choice in the data dir, takes an old server's
// data dir for a server's, treats peers from before the voters route as
// "server" (what such an agent always was), and gives up with an error
// naming --role when nobody answers.
func TestResolveRole(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	old := httptest.NewServer(http.NotFoundHandler())
	defer old.Close()
	oldJoin := joinOf(t, old.URL)

	kept := t.TempDir()
	if err := keepRole(kept, RoleClient); err != nil {
		t.Fatal(err)
	}
	cc := cluster.Config{DataDir: kept, Join: oldJoin}
	if r, err := resolveRole(t.Context(), &cc, nil, logger); err != nil || r != RoleClient {
		t.Fatalf("kept client: %q, %v", r, err)
	}

	raftDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(raftDir, "raft.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cc = cluster.Config{DataDir: raftDir, Join: []string{"127.0.0.1:1"}}
	if r, err := resolveRole(t.Context(), &cc, nil, logger); err != nil || r != RoleServer {
		t.Fatalf("a data dir with raft state: %q, %v", r, err)
	}

	fresh := t.TempDir()
	cc = cluster.Config{DataDir: fresh, Join: oldJoin}
	if r, err := resolveRole(t.Context(), &cc, nil, logger); err != nil || r != RoleServer {
		t.Fatalf("old peers: %q, %v", r, err)
	}
	if b, _ := os.ReadFile(filepath.Join(fresh, roleFile)); strings.TrimSpace(string(b)) != RoleServer {
		t.Fatalf("the role file holds %q, want server", b)
	}

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, roleFile), []byte("voter\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cc = cluster.Config{DataDir: bad, Join: oldJoin}
	if _, err := resolveRole(t.Context(), &cc, nil, logger); err == nil || !strings.Contains(err.Error(), "voter") {
		t.Fatalf("a garbled role file: %v, want an error naming its content", err)
	}

	// Nobody listening: the error says to pass --role.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadJoin := joinOf(t, "http://"+ln.Addr().String())
	ln.Close()
	defer func(d time.Duration) { roleAsk = d }(roleAsk)
	roleAsk = 500 * time.Millisecond
	cc = cluster.Config{DataDir: t.TempDir(), Join: deadJoin}
	if _, err := resolveRole(t.Context(), &cc, nil, logger); err == nil || !strings.Contains(err.Error(), "--role server or --role client") {
		t.Fatalf("no server answering: %v, want an error naming --role", err)
	}
}

// joinOf is the --join value (HOST:BASE, BASE = the HTTP port + 0) that
// makes cluster.ServerURLs point at url.
func joinOf(t *testing.T, url string) []string {
	t.Helper()
	return []string{strings.TrimPrefix(url, "http://")}
}
