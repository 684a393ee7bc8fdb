package fsm

import (
	"fmt"
	"time"
)

// ACL records (issue 16). A token's secret never reaches the log or the
// state: the API hashes it (SHA-256, hex) before it builds a command, so
// a snapshot, a backup or a leaked state file holds only hashes. The
// cluster-internal secret (ACLInternal) is the exception: every node must
// present it, so it is stored as is (docs/security.md, threat model).
//
// The buckets are created by the first ACL command, not at Open, so a
// state that has never used ACLs hashes as before they existed.
var (
	// bucketACLTokens: accessor ID → ACLToken.
	bucketACLTokens = []byte("acl_tokens")
	// bucketACLSecrets: secret hash (hex) → accessor ID.
	bucketACLSecrets = []byte("acl_secrets")
	// bucketACLMeta: aclBootstrapped → accessor ID of the bootstrap
	// token; aclInternal → the cluster-internal secret; aclInternalPrev →
	// the one before the last rotation (still accepted).
	bucketACLMeta = []byte("acl_meta")
)

var (
	aclBootstrapped = []byte("bootstrapped")
	aclInternal     = []byte("internal_secret")
	aclInternalPrev = []byte("internal_secret_prev")
)

// Command types of the ACL.
const (
	CmdACLBootstrap   CommandType = "acl_bootstrap"    // ACLBootstrap
	CmdACLCreateToken CommandType = "acl_create_token" // ACLCreateToken
	CmdACLRevokeToken CommandType = "acl_revoke_token" // ACLRevokeToken
	CmdACLInternal    CommandType = "acl_internal"     // ACLInternal
)

// DefaultNamespace is the namespace of everything submitted without one.
// Stored records leave it out (an empty namespace is the default one), so
// state written before namespaces existed needs no migration and hashes
// the same.
const DefaultNamespace = "default"

// NamespaceOf returns ns, or DefaultNamespace for "".
func NamespaceOf(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// StoredNamespace is how ns is stored: "" for the default namespace.
func StoredNamespace(ns string) string {
	if ns == DefaultNamespace {
		return ""
	}
	return ns
}

// ACLRole is one grant of a token: a role name (the API defines what each
// allows) and, for namespaced roles, the namespace ("*" = every one).
type ACLRole struct {
	Role      string `json:"role"`
	Namespace string `json:"namespace,omitempty"`
	// Node is the client agent a "client" role speaks for ("*" = any):
	// its work stream and reports, under its own name only.
	Node string `json:"node,omitempty"`
}

// ACLToken is the replicated record of one token. SecretHash is the hex
// SHA-256 of the secret; the secret itself is shown once, at creation.
type ACLToken struct {
	AccessorID  string     `json:"accessor_id"`
	Name        string     `json:"name,omitempty"`
	SecretHash  string     `json:"secret_hash"`
	Roles       []ACLRole  `json:"roles"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	CreateIndex uint64     `json:"create_index"`
}

// Expired reports whether t has expired at now.
func (t *ACLToken) Expired(now time.Time) bool {
	return t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)
}

// ACLBootstrap creates the first (management) token; refused once any
// bootstrap has happened.
type ACLBootstrap struct {
	Token ACLToken `json:"token"`
}

// ACLCreateToken adds a token.
type ACLCreateToken struct {
	Token ACLToken `json:"token"`
}

// ACLRevokeToken deletes a token: its secret is unknown from then on.
type ACLRevokeToken struct {
	AccessorID string `json:"accessor_id"`
}

// ACLInternal sets the cluster-internal secret nodes present to each
// other's /v1/internal/ endpoints; refused once one is set, unless Rotate:
// then the current secret becomes the previous one (still accepted, so a
// node that has not applied the rotation yet is not locked out) and Secret
// the current one.
type ACLInternal struct {
	Secret string `json:"secret"`
	Rotate bool   `json:"rotate,omitempty"`
}

func validToken(t *ACLToken) error {
	if err := validKey("token.accessor_id", t.AccessorID, maxIDLen); err != nil {
		return err
	}
	if len(t.SecretHash) != 64 {
		return fmt.Errorf("%w: token.secret_hash: want 64 hex digits, got %d bytes", ErrBadCommand, len(t.SecretHash))
	}
	if len(t.Roles) == 0 {
		return fmt.Errorf("%w: token.roles: empty", ErrBadCommand)
	}
	return nil
}

func (a *applier) putToken(t *ACLToken) error {
	if err := validToken(t); err != nil {
		return err
	}
	toks, err := a.bucket(bucketACLTokens)
	if err != nil {
		return err
	}
	secrets, err := a.bucket(bucketACLSecrets)
	if err != nil {
		return err
	}
	if toks.Get([]byte(t.AccessorID)) != nil {
		return fmt.Errorf("%w: token %q already exists", ErrConflict, t.AccessorID)
	}
	if secrets.Get([]byte(t.SecretHash)) != nil {
		return fmt.Errorf("%w: a token with this secret already exists", ErrConflict)
	}
	t.CreatedAt, t.CreateIndex = a.at, a.index
	if err := a.putRecord(toks, []byte(t.AccessorID), t); err != nil {
		return err
	}
	return a.put(secrets, []byte(t.SecretHash), []byte(t.AccessorID))
}

func (a *applier) aclBootstrap(p *ACLBootstrap, _ *Result) error {
	if b := a.tx.Bucket(bucketACLMeta); b != nil && b.Get(aclBootstrapped) != nil {
		return fmt.Errorf("%w: ACL already bootstrapped (the bootstrap token was issued once; create more tokens with a management token)", ErrConflict)
	}
	if err := validToken(&p.Token); err != nil {
		return err
	}
	meta, err := a.bucket(bucketACLMeta)
	if err != nil {
		return err
	}
	if err := a.putToken(&p.Token); err != nil {
		return err
	}
	return a.put(meta, aclBootstrapped, []byte(p.Token.AccessorID))
}

func (a *applier) aclCreateToken(p *ACLCreateToken, _ *Result) error {
	return a.putToken(&p.Token)
}

func (a *applier) aclRevokeToken(p *ACLRevokeToken, _ *Result) error {
	if err := validKey("accessor_id", p.AccessorID, maxIDLen); err != nil {
		return err
	}
	toks := a.tx.Bucket(bucketACLTokens)
	var v []byte
	if toks != nil {
		v = toks.Get([]byte(p.AccessorID))
	}
	if v == nil {
		return fmt.Errorf("%w: token %q", ErrNotFound, p.AccessorID)
	}
	var t ACLToken
	if err := decode(v, &t); err != nil {
		return err
	}
	if err := a.del(toks, []byte(p.AccessorID)); err != nil {
		return err
	}
	if secrets := a.tx.Bucket(bucketACLSecrets); secrets != nil {
		return a.del(secrets, []byte(t.SecretHash))
	}
	return nil
}

func (a *applier) aclInternal(p *ACLInternal, _ *Result) error {
	if len(p.Secret) < 32 {
		return fmt.Errorf("%w: secret: at least 32 bytes", ErrBadCommand)
	}
	var cur []byte
	if b := a.tx.Bucket(bucketACLMeta); b != nil {
		cur = b.Get(aclInternal)
	}
	if cur != nil && !p.Rotate {
		return fmt.Errorf("%w: the cluster-internal secret is already set", ErrConflict)
	}
	if p.Rotate && cur == nil {
		return fmt.Errorf("%w: no cluster-internal secret to rotate yet (the ACL leader sets one when it takes office)", ErrConflict)
	}
	if p.Rotate && string(cur) == p.Secret {
		return fmt.Errorf("%w: secret: the new cluster-internal secret equals the current one", ErrBadCommand)
	}
	meta, err := a.bucket(bucketACLMeta)
	if err != nil {
		return err
	}
	if p.Rotate {
		if err := a.put(meta, aclInternalPrev, append([]byte(nil), cur...)); err != nil {
			return err
		}
	}
	return a.put(meta, aclInternal, []byte(p.Secret))
}

// ACLTokenByHash returns the token whose secret hashes to hash, or
// ErrNotFound.
func (t *Tx) ACLTokenByHash(hash string) (*ACLToken, error) {
	secrets := t.tx.Bucket(bucketACLSecrets)
	var id []byte
	if secrets != nil {
		id = secrets.Get([]byte(hash))
	}
	if id == nil {
		return nil, fmt.Errorf("%w: token", ErrNotFound)
	}
	return t.ACLToken(string(id))
}

// ACLToken returns one token by accessor ID, or ErrNotFound.
func (t *Tx) ACLToken(accessor string) (*ACLToken, error) {
	var v []byte
	if b := t.tx.Bucket(bucketACLTokens); b != nil {
		v = b.Get([]byte(accessor))
	}
	return record[ACLToken](v, "token", accessor)
}

// ACLTokens lists every token by accessor ID.
func (t *Tx) ACLTokens() ([]ACLToken, error) {
	return bucketRecords[ACLToken](t.tx.Bucket(bucketACLTokens))
}

// ACLBootstrapped reports whether the bootstrap token was issued.
func (t *Tx) ACLBootstrapped() bool {
	b := t.tx.Bucket(bucketACLMeta)
	return b != nil && b.Get(aclBootstrapped) != nil
}

// ACLInternalPrevious is the cluster-internal secret before the last
// rotation ("" if it never rotated); nodes still accept it.
func (t *Tx) ACLInternalPrevious() string {
	if b := t.tx.Bucket(bucketACLMeta); b != nil {
		return string(b.Get(aclInternalPrev))
	}
	return ""
}

// ACLInternalSecret is the cluster-internal secret ("" before the leader
// set one).
func (t *Tx) ACLInternalSecret() string {
	if b := t.tx.Bucket(bucketACLMeta); b != nil {
		return string(b.Get(aclInternal))
	}
	return ""
}
