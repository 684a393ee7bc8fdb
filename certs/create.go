package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// Names carried by agent and user certificates; see the package comment.
const (
	// ServerName is in every agent certificate; agents verify one another
	// against it (not against IPs, which change).
	ServerName = "server.foreman"
	// ClientName is in every user certificate made by `tls cert create
	// --client`.
	ClientName = "client.foreman"
)

// Errors of certificate creation.
var (
	// ErrExists: the target file exists; foreman never overwrites a key.
	ErrExists = errors.New("file exists (remove it first; foreman never overwrites keys)")
	// ErrNotCA: the CA certificate given is not a CA.
	ErrNotCA = errors.New("the certificate is not a CA certificate")
)

// Role is what a certificate is for.
type Role int

const (
	// RoleServer is an agent's certificate: server and client auth, named
	// ServerName, localhost and 127.0.0.1 plus the given names.
	RoleServer Role = iota
	// RoleClient is a user's (CLI, curl, browser) certificate: client auth.
	RoleClient
)

// CertRequest describes a certificate to issue.
type CertRequest struct {
	Role     Role
	Node     string   // common name: the node (or user) name
	IPs      []net.IP // extra IP SANs
	DNSNames []string // extra DNS SANs
	Validity time.Duration
}

// newTemplate makes a certificate's ECDSA P-256 key and the fields every
// foreman certificate shares: a fresh serial, the common name in
// organisation "foreman", valid from a minute ago (clock skew) for validity.
func newTemplate(commonName string, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"foreman"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validity),
	}, key, nil
}

// CreateCA makes a self-signed ECDSA P-256 CA valid for validity and
// returns its certificate and key in PEM.
func CreateCA(commonName string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	tmpl, key, err := newTemplate(commonName, validity)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid, tmpl.IsCA, tmpl.MaxPathLenZero = true, true, true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

// CreateCert issues a certificate for req signed by the CA in caCertPEM
// and caKeyPEM, and returns the certificate and its key in PEM.
func CreateCert(caCertPEM, caKeyPEM []byte, req CertRequest) (certPEM, keyPEM []byte, err error) {
	ca, err := tlsKeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("CA: %w", err)
	}
	if !caCert.IsCA {
		return nil, nil, ErrNotCA
	}
	if req.Node == "" {
		return nil, nil, errors.New("node: must be set")
	}
	tmpl, key, err := newTemplate(req.Node, req.Validity)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.IPAddresses, tmpl.DNSNames = req.IPs, req.DNSNames
	switch req.Role {
	case RoleServer:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = appendNew(tmpl.DNSNames, ServerName, "localhost", req.Node)
		tmpl.IPAddresses = appendIP(tmpl.IPAddresses, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
	case RoleClient:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = appendNew(tmpl.DNSNames, ClientName)
	default:
		return nil, nil, fmt.Errorf("role %d: unknown", req.Role)
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter // never outlive the CA
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

// WriteFiles writes a certificate (0644) and its key (0600), refusing to
// overwrite either.
func WriteFiles(certFile string, certPEM []byte, keyFile string, keyPEM []byte) error {
	for _, f := range []string{certFile, keyFile} {
		if _, err := os.Stat(f); err == nil {
			return fmt.Errorf("%s: %w", f, ErrExists)
		}
	}
	if err := writeExclusive(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeExclusive(certFile, certPEM, 0o644); err != nil {
		os.Remove(keyFile)
		return err
	}
	return nil
}

func writeExclusive(name string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s: %w", name, ErrExists)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	return f.Close()
}

func encode(der []byte, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		found := false
		for _, x := range list {
			found = found || x == a
		}
		if !found && a != "" {
			list = append(list, a)
		}
	}
	return list
}

func appendIP(list []net.IP, add ...net.IP) []net.IP {
	for _, a := range add {
		found := false
		for _, x := range list {
			found = found || x.Equal(a)
		}
		if !found {
			list = append(list, a)
		}
	}
	return list
}
