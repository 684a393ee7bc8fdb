package certs_test

import (
	"crypto/ecdsa"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/certs"
)

// pki is a CA and the files of certificates issued by it in a temp dir.
type pki struct {
	t              *testing.T
	dir            string
	caCert, caKey  []byte
	caFile, caName string
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	c, k, err := certs.CreateCA(name, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{t: t, dir: t.TempDir(), caCert: c, caKey: k, caName: name}
	p.caFile = filepath.Join(p.dir, "ca.pem")
	if err := certs.WriteFiles(p.caFile, c, filepath.Join(p.dir, "ca-key.pem"), k); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue writes a certificate and key named base and returns the Files.
func (p *pki) issue(base string, role certs.Role) certs.Files {
	p.t.Helper()
	c, k, err := certs.CreateCert(p.caCert, p.caKey, certs.CertRequest{Role: role, Node: base, Validity: time.Hour})
	if err != nil {
		p.t.Fatal(err)
	}
	f := certs.Files{CA: p.caFile, Cert: filepath.Join(p.dir, base+".pem"), Key: filepath.Join(p.dir, base+"-key.pem")}
	os.Remove(f.Cert)
	os.Remove(f.Key)
	if err := certs.WriteFiles(f.Cert, c, f.Key, k); err != nil {
		p.t.Fatal(err)
	}
	return f
}

func load(t *testing.T, f certs.Files) *certs.Store {
	t.Helper()
	s, err := certs.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handshake runs one TLS handshake between a client and server config over
// loopback and returns the client's view (or the first error of either side).
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err == nil {
			_, err = io.WriteString(tc, "ok")
		}
		srvErr <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := tls.Client(c, client)
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	cerr := tc.Handshake()
	if cerr == nil {
		// TLS 1.3 client handshakes finish before the server has checked the
		// client's certificate: read the server's "ok" to learn its verdict.
		buf := make([]byte, 2)
		_, cerr = io.ReadFull(tc, buf)
	}
	serr := <-srvErr
	if serr != nil {
		return tls.ConnectionState{}, serr
	}
	return tc.ConnectionState(), cerr
}

func TestCreateWritesKeysPrivate(t *testing.T) {
	p := newPKI(t, "test CA")
	f := p.issue("n1", certs.RoleServer)
	for _, name := range []string{f.Key, filepath.Join(p.dir, "ca-key.pem")} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, st.Mode().Perm())
		}
	}
	// Never overwrite.
	c, k, _ := certs.CreateCA("x", time.Hour)
	if err := certs.WriteFiles(p.caFile, c, filepath.Join(p.dir, "other-key.pem"), k); !errors.Is(err, certs.ErrExists) {
		t.Fatalf("overwrite: err = %v, want ErrExists", err)
	}
	leaf := load(t, f).Leaf()
	if !certs.IsServer(leaf) || leaf.Subject.CommonName != "n1" {
		t.Fatalf("server cert: names %v, cn %q", leaf.DNSNames, leaf.Subject.CommonName)
	}
	if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Fatalf("public key %T", leaf.PublicKey)
	}
	cl := load(t, p.issue("alice", certs.RoleClient)).Leaf()
	if certs.IsServer(cl) {
		t.Fatal("a client certificate counts as a server certificate")
	}
	// A leaf cannot sign.
	lc, _ := os.ReadFile(f.Cert)
	lk, _ := os.ReadFile(f.Key)
	if _, _, err := certs.CreateCert(lc, lk, certs.CertRequest{Node: "x", Validity: time.Hour}); !errors.Is(err, certs.ErrNotCA) {
		t.Fatalf("sign with a leaf: err = %v, want ErrNotCA", err)
	}
}

func TestPeerMutualTLS(t *testing.T) {
	p := newPKI(t, "cluster CA")
	n1 := load(t, p.issue("n1", certs.RoleServer))
	n2 := load(t, p.issue("n2", certs.RoleServer))
	user := load(t, p.issue("alice", certs.RoleClient))
	other := newPKI(t, "another CA")
	stranger := load(t, other.issue("n9", certs.RoleServer))

	t.Run("agents trust each other", func(t *testing.T) {
		cs, err := handshake(t, n1.PeerServerConfig(), n2.PeerClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		if cs.PeerCertificates[0].Subject.CommonName != "n1" {
			t.Fatalf("peer %q", cs.PeerCertificates[0].Subject.CommonName)
		}
	})
	t.Run("a user certificate may not speak raft", func(t *testing.T) {
		if _, err := handshake(t, n1.PeerServerConfig(), user.PeerClientConfig()); err == nil {
			t.Fatal("handshake succeeded")
		}
	})
	t.Run("another CA's agent is refused", func(t *testing.T) {
		if _, err := handshake(t, n1.PeerServerConfig(), stranger.PeerClientConfig()); err == nil {
			t.Fatal("handshake succeeded")
		}
		if _, err := handshake(t, stranger.PeerServerConfig(), n1.PeerClientConfig()); err == nil {
			t.Fatal("dialled an agent of another CA")
		}
	})
	t.Run("no client certificate is refused", func(t *testing.T) {
		cfg, err := certs.ClientConfig(p.caFile, "", "")
		if err != nil {
			t.Fatal(err)
		}
		cfg.ServerName = certs.ServerName
		if _, err := handshake(t, n1.PeerServerConfig(), cfg); err == nil {
			t.Fatal("handshake succeeded")
		}
	})
}

func TestHTTPServerClientCerts(t *testing.T) {
	p := newPKI(t, "cluster CA")
	n1 := load(t, p.issue("n1", certs.RoleServer))
	alice := p.issue("alice", certs.RoleClient)
	other := newPKI(t, "another CA")
	mallory := other.issue("mallory", certs.RoleClient)

	anon, _ := certs.ClientConfig(p.caFile, "", "")
	withCert, err := certs.ClientConfig(p.caFile, alice.Cert, alice.Key)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := certs.ClientConfig(p.caFile, mallory.Cert, mallory.Key)
	if err != nil {
		t.Fatal(err)
	}
	// Go's client would quietly send no certificate the server's CA list
	// does not name; curl and others send what they are given.
	fc := foreign.Certificates[0]
	foreign.Certificates = nil
	foreign.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &fc, nil }
	for _, cfg := range []*tls.Config{anon, withCert, foreign} {
		cfg.ServerName = "127.0.0.1"
	}
	cases := []struct {
		name    string
		require bool
		client  *tls.Config
		ok      bool
		server  bool // the server sees an agent certificate
	}{
		{"no cert, optional", false, anon, true, false},
		{"user cert, optional", false, withCert, true, false},
		{"other CA's cert, optional", false, foreign, false, false},
		{"no cert, required", true, anon, false, false},
		{"user cert, required", true, withCert, true, false},
		{"agent cert", true, n1.PeerClientConfig(), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := handshake(t, n1.HTTPServerConfig(tc.require), tc.client)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	// The CLI verifies the agent by its address (127.0.0.1 is in every agent cert).
	if _, err := handshake(t, n1.HTTPServerConfig(false), anon); err != nil {
		t.Fatal(err)
	}
}

func TestReloadSwapsCertificate(t *testing.T) {
	p := newPKI(t, "cluster CA")
	f := p.issue("n1", certs.RoleServer)
	s := load(t, f)
	client := load(t, p.issue("n2", certs.RoleServer)).PeerClientConfig()
	serial := func() string {
		cs, err := handshake(t, s.PeerServerConfig(), client)
		if err != nil {
			t.Fatal(err)
		}
		return cs.PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	if before != s.Leaf().SerialNumber.String() {
		t.Fatal("served certificate is not Leaf()")
	}

	// A broken file keeps the old certificate.
	if err := os.WriteFile(f.Cert, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("Reload accepted a garbage certificate")
	}
	if got := serial(); got != before {
		t.Fatalf("after a failed reload the serial changed: %s -> %s", before, got)
	}

	p.issue("n1", certs.RoleServer) // rewrite n1's files
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	after := serial()
	if after == before {
		t.Fatal("Reload did not change the served certificate")
	}
}

func TestClientConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, pem.EncodeToMemory(&pem.Block{Type: "NOTHING", Bytes: []byte("x")}), 0o644)
	if _, err := certs.ClientConfig(bad, "", ""); !errors.Is(err, certs.ErrNoCA) {
		t.Fatalf("err = %v", err)
	}
	if _, err := certs.ClientConfig("", "a.pem", ""); err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("err = %v", err)
	}
	if _, err := certs.ClientConfig(filepath.Join(dir, "missing"), "", ""); err == nil {
		t.Fatal("missing CA accepted")
	}
}
