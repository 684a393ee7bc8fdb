package rig

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/foreman-sched/foreman/certs"
)

// EnvGossipKey is how the rig hands agents the gossip key (the agent's
// FOREMAN_GOSSIP_KEY: environment, not argv, as docs/security.md advises).
const EnvGossipKey = "FOREMAN_GOSSIP_KEY"

// PKI is a secure cluster's material: a CA made with the certs package
// (what `foreman tls ca create` writes), one agent certificate per node
// (with its namespace IP, so harness clients verify https://IP:port), and
// a gossip key.
type PKI struct {
	Dir       string
	CAFile    string
	GossipKey string // base64, 32 bytes

	caCert, caKey []byte
	client        *tls.Config
}

// EnableTLS makes the CA and gossip key under dir/tls; every node started
// from now on gets an agent certificate, --tls-cert/--tls-key/--tls-ca
// (HTTPS, mutual TLS for raft and the internal HTTP) and the gossip key,
// and every harness client speaks HTTPS trusting the CA. Call before Start.
func (c *Cluster) EnableTLS() error {
	dir := filepath.Join(c.Dir, "tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caCert, caKey, err := certs.CreateCA("foreman jepsen CA", 24*time.Hour)
	if err != nil {
		return err
	}
	p := &PKI{Dir: dir, CAFile: filepath.Join(dir, "foreman-ca.pem"), caCert: caCert, caKey: caKey}
	if err := certs.WriteFiles(p.CAFile, caCert, filepath.Join(dir, "foreman-ca-key.pem"), caKey); err != nil {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	p.GossipKey = base64.StdEncoding.EncodeToString(key)
	if p.client, err = certs.ClientConfig(p.CAFile, "", ""); err != nil {
		return err
	}
	c.PKI = p
	for _, n := range c.Nodes {
		n.Scheme = "https"
	}
	return nil
}

// tlsFlags issues node n's agent certificate (once) and returns the
// agent's TLS flags.
func (p *PKI) tlsFlags(n *Node) ([]string, error) {
	cert, key := filepath.Join(p.Dir, n.Name+"-server.pem"), filepath.Join(p.Dir, n.Name+"-server-key.pem")
	if _, err := os.Stat(cert); err != nil {
		ip := net.ParseIP(n.IP)
		if ip == nil {
			return nil, fmt.Errorf("%s: IP %q", n.Name, n.IP)
		}
		cp, kp, err := certs.CreateCert(p.caCert, p.caKey, certs.CertRequest{Role: certs.RoleServer, Node: n.Name,
			IPs: []net.IP{ip}, Validity: 24 * time.Hour})
		if err != nil {
			return nil, err
		}
		if err := certs.WriteFiles(cert, cp, key, kp); err != nil {
			return nil, err
		}
	}
	return []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", p.CAFile}, nil
}

// ClientTLS is the harness clients' TLS config (nil without TLS).
func (c *Cluster) ClientTLS() *tls.Config {
	if c.PKI == nil {
		return nil
	}
	return c.PKI.client.Clone()
}
