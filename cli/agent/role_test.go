package agent

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// voterServer answers GET /v1/internal/voters with statuses in turn (the
// last one from then on; 200 says the voters are all there) and counts
// the questions.
func voterServer(t *testing.T, statuses ...int) (join []string, asked *atomic.Int32) {
	t.Helper()
	asked = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(asked.Add(1))
		code := statuses[min(n, len(statuses))-1]
		if code != http.StatusOK {
			http.Error(w, `{"error": "no"}`, code)
			return
		}
		_ = json.NewEncoder(w).Encode(cluster.VotersInfo{Voters: 3, Target: 3})
	}))
	t.Cleanup(srv.Close)
	return joinOf(t, srv.URL), asked
}

// A token the servers do not know yet (401: created a moment ago through
// another server) is asked about again until they do; one they never
// learn ends the asking after the grace, and a token of another role
// (403) at once.
func TestResolveRoleWaitsForANewToken(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	defer func(d time.Duration) { unknownCredentialGrace = d }(unknownCredentialGrace)
	unknownCredentialGrace = 5 * time.Second

	join, asked := voterServer(t, http.StatusUnauthorized, http.StatusUnauthorized, http.StatusOK)
	cc := cluster.Config{DataDir: t.TempDir(), Join: join}
	if r, err := resolveRole(t.Context(), &cc, nil, logger); err != nil || r != RoleClient || asked.Load() != 3 {
		t.Fatalf("a token known on the third question: %q, %v after %d questions; want client after 3", r, err, asked.Load())
	}

	join, asked = voterServer(t, http.StatusForbidden)
	cc = cluster.Config{DataDir: t.TempDir(), Join: join}
	if _, err := resolveRole(t.Context(), &cc, nil, logger); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "client:NAME") || asked.Load() != 1 {
		t.Fatalf("a token of another role: %v after %d questions; want a refusal naming client:NAME after 1", err, asked.Load())
	}

	unknownCredentialGrace = 300 * time.Millisecond
	join, asked = voterServer(t, http.StatusUnauthorized)
	cc = cluster.Config{DataDir: t.TempDir(), Join: join}
	if _, err := resolveRole(t.Context(), &cc, nil, logger); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "client:NAME") || asked.Load() < 2 {
		t.Fatalf("a token never known: %v after %d questions; want a refusal naming client:NAME after more than 1", err, asked.Load())
	}
	if _, err := os.Stat(filepath.Join(cc.DataDir, roleFile)); !os.IsNotExist(err) {
		t.Fatalf("a refused agent kept a role: %v", err)
	}
}
