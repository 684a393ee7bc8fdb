// Package certs is foreman's TLS material and the configs made of it.
//
// It creates a cluster CA and the certificates signed by it (`foreman tls ...`), loading them for an agent
// with reload on SIGHUP (Store), the tls.Configs each listener and dialler
// uses, and the identity check that tells an agent's certificate from a
// user's.
//
// Identity: every certificate is signed by the one cluster CA. An agent
// ("server") certificate carries the DNS name ServerName
// ("server.foreman") and both server and client auth key usages; a user
// ("client") certificate carries ClientName and client auth only. Raft, the
// internal node-to-node HTTP paths and forwarded submits accept only
// server certificates; the public API accepts any certificate of the CA
// (or none, unless the agent requires one).
//
// This package imports only the standard library (crypto/x509, crypto/tls,
// crypto/ecdsa): no third-party TLS code to keep patched.
package certs
