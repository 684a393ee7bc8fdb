package cluster_test

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/certs"
	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
)

// testPKI is a cluster CA in a temp dir that issues agent and user certs.
type testPKI struct {
	t             testing.TB
	dir           string
	caCert, caKey []byte
	caFile        string
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	c, k, err := certs.CreateCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{t: t, dir: t.TempDir(), caCert: c, caKey: k}
	p.caFile = filepath.Join(p.dir, "ca.pem")
	if err := os.WriteFile(p.caFile, c, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *testPKI) files(name string, role certs.Role) certs.Files {
	p.t.Helper()
	c, k, err := certs.CreateCert(p.caCert, p.caKey, certs.CertRequest{Role: role, Node: name, Validity: time.Hour})
	if err != nil {
		p.t.Fatal(err)
	}
	f := certs.Files{CA: p.caFile, Cert: filepath.Join(p.dir, name+".pem"), Key: filepath.Join(p.dir, name+"-key.pem")}
	if err := certs.WriteFiles(f.Cert, c, f.Key, k); err != nil {
		p.t.Fatal(err)
	}
	return f
}

func (p *testPKI) store(name string, role certs.Role) *certs.Store {
	p.t.Helper()
	s, err := certs.Load(p.files(name, role))
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

func gossipKey(t testing.TB) []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// A cluster with mutual TLS on raft and the internal HTTP paths and an
// encrypted gossip works end to end (bootstrap, joins, forwarded writes);
// the agent-only paths refuse plain HTTP, user certificates and other CAs'
// certificates; a node with the wrong gossip key cannot join.
func TestSecureCluster(t *testing.T) {
	pki := newTestPKI(t)
	key := gossipKey(t)
	stores := make([]*certs.Store, 3)
	c := clustertest.NewCluster(t, 3, clustertest.Options{Configure: func(i int, cfg *cluster.Config) {
		if stores[i] == nil {
			stores[i] = pki.store(cfg.Name, certs.RoleServer)
		}
		cfg.TLS, cfg.GossipKeys = stores[i], [][]byte{key}
	}})
	leader := c.WaitForLeader()
	var ids []string
	for _, f := range c.Followers() {
		ids = append(ids, submit(t, f)) // forwarded to the leader over https
	}
	c.WaitConverged()
	for _, nd := range c.Live() {
		for _, id := range ids {
			if err := hasJob(nd, id); err != nil {
				t.Fatal(err)
			}
		}
	}

	httpAddr := fmt.Sprintf("127.0.0.1:%d", leader.Port)
	raftAddr := fmt.Sprintf("127.0.0.1:%d", leader.Port+1)
	index := "https://" + httpAddr + cluster.InternalPrefix + "index"
	get := func(cfg *tls.Config, url string) (int, string, error) {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}

	t.Run("plain HTTP to the TLS port", func(t *testing.T) {
		code, body, err := get(nil, "http://"+httpAddr+cluster.InternalPrefix+"index")
		if err != nil || code != http.StatusBadRequest || !strings.Contains(body, "HTTP request to an HTTPS server") {
			t.Fatalf("got %d %q %v", code, body, err)
		}
	})
	t.Run("an agent certificate reaches the internal paths", func(t *testing.T) {
		code, body, err := get(pki.store("peer", certs.RoleServer).PeerClientConfig(), index)
		if err != nil || code != http.StatusOK {
			t.Fatalf("got %d %q %v", code, body, err)
		}
	})
	t.Run("a user certificate does not", func(t *testing.T) {
		uf := pki.files("alice", certs.RoleClient)
		cfg, err := certs.ClientConfig(pki.caFile, uf.Cert, uf.Key)
		if err != nil {
			t.Fatal(err)
		}
		code, body, err := get(cfg, index)
		if err != nil || code != http.StatusForbidden || !strings.Contains(body, "agent certificate") {
			t.Fatalf("got %d %q %v", code, body, err)
		}
		noCert, _ := certs.ClientConfig(pki.caFile, "", "")
		if code, _, err := get(noCert, index); err != nil || code != http.StatusForbidden {
			t.Fatalf("no certificate: got %d %v", code, err)
		}
	})
	t.Run("a client's certificate speaks only for its node", func(t *testing.T) {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: pki.store("c1", certs.RoleServer).PeerClientConfig()}}
		defer hc.CloseIdleConnections()
		post := func(path string) (int, string) {
			resp, err := hc.Post("https://"+httpAddr+cluster.InternalPrefix+path, "application/x-ndjson", strings.NewReader("{}\n"))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		for _, path := range []string{"work/c2", "reports/c2?index=0"} {
			if code, body := post(path); code != http.StatusForbidden || !strings.Contains(body, `node \"c1\"`) {
				t.Errorf("%s with c1's certificate: %d %s, want 403 naming c1", path, code, body)
			}
		}
		// Its own node gets past the check (to the next refusal: these
		// nodes serve no work streams; the reports' empty body).
		if code, body := post("work/c1"); code == http.StatusForbidden {
			t.Errorf("work/c1 with c1's certificate: %d %s, want past the certificate check", code, body)
		}
		if code, body := post("reports/c1?index=0"); code != http.StatusBadRequest || !strings.Contains(body, "reports") {
			t.Errorf("reports/c1 with c1's certificate: %d %s, want 400 about the reports", code, body)
		}
	})
	t.Run("another CA's agent certificate is refused", func(t *testing.T) {
		other := newTestPKI(t)
		_, _, err := get(other.store("n9", certs.RoleServer).PeerClientConfig(), index)
		if err == nil {
			t.Fatal("request succeeded")
		}
	})
	t.Run("raft refuses plain TCP and user certificates", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", raftAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		conn.Write([]byte{0, 1, 2, 3, 4, 5, 6, 7}) // a raft RPC type byte and garbage
		if _, err := io.ReadAll(conn); err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("plain TCP: %v", err)
		}
		conn.Close()
		user := pki.store("bob", certs.RoleClient)
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", raftAddr, user.PeerClientConfig())
		if err == nil {
			tc.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = tc.Read(make([]byte, 1)) // TLS 1.3: the server's verdict arrives after the handshake
			tc.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("user certificate on raft: err = %v", err)
		}
	})
	t.Run("a node with the wrong gossip key cannot join", func(t *testing.T) {
		intruder := clustertest.NewCluster(t, 1, clustertest.Options{NamePrefix: "intruder", Configure: func(i int, cfg *cluster.Config) {
			cfg.TLS, cfg.GossipKeys = pki.store(cfg.Name+fmt.Sprint(time.Now().UnixNano()), certs.RoleServer), [][]byte{gossipKey(t)}
		}})
		err := intruder.Node(0).Join([]string{httpAddr})
		if err == nil || errors.Is(err, cluster.ErrClusterMismatch) {
			t.Fatalf("join with the wrong key: err = %v; want a gossip failure", err)
		}
		for _, m := range leader.Members() {
			if strings.HasPrefix(m.Name, "intruder") {
				t.Fatalf("the leader lists %s", m.Name)
			}
		}
		// The refusal is the key's, not some other join failure.
		if !strings.Contains(err.Error(), "decrypt") && !strings.Contains(err.Error(), "encrypt") {
			t.Fatalf("join with the wrong key: err = %v; want a decryption failure", err)
		}
	})
}
