package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// Errors of loading and verifying.
var (
	// ErrNoCA: the CA file holds no certificate.
	ErrNoCA = errors.New("no PEM certificate in the CA file")
	// ErrNotServer: a peer on an agent-only path presented a certificate
	// that is not an agent's (see ServerName).
	ErrNotServer = errors.New("the peer's certificate is not a foreman agent certificate (want DNS name " + ServerName + " and server auth)")
)

// Files names an agent's TLS material.
type Files struct {
	CA   string // the cluster CA bundle (PEM; may hold several CAs during a rotation)
	Cert string // this agent's certificate (PEM; may be followed by intermediates)
	Key  string // its private key (PEM)
}

// material is one consistent load of Files.
type material struct {
	cert *tls.Certificate
	leaf *x509.Certificate
	pool *x509.CertPool
}

// Store holds an agent's TLS material and swaps it atomically on Reload,
// so certificates rotate without a restart: every handshake after the swap
// uses the new certificate and CA bundle, connections already open keep
// theirs. Safe for concurrent use.
type Store struct {
	files Files
	cur   atomic.Pointer[material]
}

// Load reads files; every file must be present and the key must match the
// certificate.
func Load(files Files) (*Store, error) {
	s := &Store{files: files}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. On any error the old material stays in use
// (a half-written file never takes an agent off the network).
func (s *Store) Reload() error {
	m, err := load(s.files)
	if err != nil {
		return err
	}
	s.cur.Store(m)
	return nil
}

// Leaf is the certificate in use now.
func (s *Store) Leaf() *x509.Certificate { return s.cur.Load().leaf }

func load(f Files) (*material, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("tls ca %s: %w", f.CA, ErrNoCA)
	}
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, fmt.Errorf("tls cert: %w", err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls key: %w", err)
	}
	cert, err := tlsKeyPair(certPEM, keyPEM)
	if err != nil {
		// tls.X509KeyPair's messages never quote key material.
		return nil, fmt.Errorf("tls cert %s / key %s: %w", f.Cert, f.Key, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls cert %s: %w", f.Cert, err)
	}
	cert.Leaf = leaf
	return &material{cert: &cert, leaf: leaf, pool: pool}, nil
}

func tlsKeyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	return tls.X509KeyPair(certPEM, keyPEM)
}

// HTTPServerConfig is the TLS config of the API/UI port. Client
// certificates are verified against the CA when given, and required when
// requireClientCert is set; the agent-only paths check PeerIsServer on top.
func (s *Store) HTTPServerConfig(requireClientCert bool) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if requireClientCert {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"http/1.1"},
				Certificates: []tls.Certificate{*m.cert},
				ClientCAs:    m.pool,
				ClientAuth:   auth,
			}, nil
		},
	}
}

// PeerServerConfig is the TLS config of the raft listener: only agents of
// this cluster (a server certificate of the CA) may connect.
func (s *Store) PeerServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*m.cert},
				ClientCAs:    m.pool,
				ClientAuth:   tls.RequireAndVerifyClientCert,
				VerifyConnection: func(cs tls.ConnectionState) error {
					if !PeerIsServer(&cs) {
						return ErrNotServer
					}
					return nil
				},
			}, nil
		},
	}
}

// PeerClientConfig is the TLS config an agent dials other agents with (raft,
// forwarded writes, log proxying): it presents this agent's certificate and
// accepts only a server certificate of the current CA bundle, named
// ServerName (agents are reached by IPs that change; the name does not).
func (s *Store) PeerClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: ServerName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
		// The standard verification runs in VerifyConnection instead, against
		// the CA bundle of the moment, so a reloaded bundle applies to new
		// connections of long-lived http.Transports too (the crypto/tls
		// documentation's own pattern for custom verification).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServer(cs, s.cur.Load().pool)
		},
	}
}

func verifyServer(cs tls.ConnectionState, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	_, err := leaf.Verify(x509.VerifyOptions{
		DNSName:       ServerName,
		Roots:         pool,
		Intermediates: inter,
		CurrentTime:   time.Now(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// IsServer says whether cert is an agent certificate (see ServerName). It
// does not verify the chain.
func IsServer(cert *x509.Certificate) bool {
	return slices.Contains(cert.DNSNames, ServerName) &&
		(slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageAny))
}

// PeerIsServer says whether the connection's peer presented a certificate
// that verified against the CA and is an agent certificate.
func PeerIsServer(cs *tls.ConnectionState) bool {
	return cs != nil && len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 && IsServer(cs.VerifiedChains[0][0])
}

// ClientConfig is a CLI's or another client's TLS config: trust the CA in
// caFile (empty: the system roots) and present certFile/keyFile when both
// are set.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA certificate %s: %w", caFile, ErrNoCA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile != "":
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	case certFile != "" || keyFile != "":
		return nil, errors.New("client certificate: set both the certificate and the key")
	}
	return cfg, nil
}
