package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// SecretPrefix starts every token secret, so secret scanners and people
// can tell one when they see it.
const SecretPrefix = "fmn_"

// TokenRequest is the body of POST /v1/acl/tokens.
type TokenRequest struct {
	Name  string        `json:"name,omitempty"`
	Roles []fsm.ACLRole `json:"roles"`
	// TTL is how long the token lives ("24h"); "" = until revoked.
	TTL string `json:"ttl,omitempty"`
	// ExpiresAt is an absolute expiry instead of TTL.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// TokenInfo is a token as the API shows it: never the secret's hash.
type TokenInfo struct {
	AccessorID string        `json:"accessor_id"`
	Name       string        `json:"name,omitempty"`
	Roles      []fsm.ACLRole `json:"roles"`
	ExpiresAt  *time.Time    `json:"expires_at,omitempty"`
	Expired    bool          `json:"expired,omitempty"`
	CreatedAt  time.Time     `json:"created_at"`
}

// NewToken is the answer to bootstrap and create: the only time the
// secret is shown.
type NewToken struct {
	TokenInfo
	Secret string `json:"secret"`
}

// TokenList is the body of GET /v1/acl/tokens.
type TokenList struct {
	Tokens []TokenInfo `json:"tokens"`
}

func (s *server) aclRoutes(m *http.ServeMux) {
	s.handle(m, "POST /v1/acl/bootstrap", s.write(s.aclBootstrap))
	s.handle(m, "GET /v1/acl/tokens", s.read(s.listTokens))
	s.handle(m, "POST /v1/acl/tokens", s.write(s.createToken))
	s.handle(m, "DELETE /v1/acl/tokens/{accessor}", s.write(s.revokeToken))
	s.handle(m, "GET /v1/acl/token/self", s.local(s.tokenSelf))
	s.handle(m, "POST /v1/acl/internal-secret/rotate", s.write(s.rotateInternalSecret))
}

// InternalRotateResponse is the reply of POST
// /v1/acl/internal-secret/rotate; the secret itself is never shown.
type InternalRotateResponse = api.InternalRotateResponse

// rotateInternalSecret draws a new cluster-internal secret on the leader
// and commits it; the old one stays accepted until the next rotation.
func (s *server) rotateInternalSecret(w http.ResponseWriter, r *http.Request) {
	if !s.acl.Enabled() {
		s.writeError(w, r, fmt.Errorf("%w: the cluster-internal secret exists only with --acl", ErrACLDisabled))
		return
	}
	secret, err := newSecret()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.apply(r.Context(), fsm.CmdACLInternal, fsm.ACLInternal{Secret: secret, Rotate: true})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "cluster-internal secret rotated", "index", res.Index)
	writeJSON(w, http.StatusOK, InternalRotateResponse{Rotated: true, Index: res.Index})
}

func tokenInfo(t *fsm.ACLToken, now time.Time) TokenInfo {
	return TokenInfo{AccessorID: t.AccessorID, Name: t.Name, Roles: t.Roles, ExpiresAt: t.ExpiresAt, Expired: t.Expired(now), CreatedAt: t.CreatedAt}
}

func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token secret: %w", err)
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// mint builds a token record and its secret and commits the record with
// the command of type t that cmd wraps around it; only the hash goes to
// raft.
func (s *server) mint(ctx context.Context, name string, roles []fsm.ACLRole, exp *time.Time, t fsm.CommandType, cmd func(fsm.ACLToken) any) (fsm.ACLToken, string, error) {
	secret, err := newSecret()
	if err != nil {
		return fsm.ACLToken{}, "", err
	}
	tok := fsm.ACLToken{AccessorID: s.ids.NewID(), Name: name, SecretHash: HashSecret(secret), Roles: roles, ExpiresAt: exp}
	if _, err := s.apply(ctx, t, cmd(tok)); err != nil {
		return fsm.ACLToken{}, "", err
	}
	return tok, secret, nil
}

func (s *server) aclBootstrap(w http.ResponseWriter, r *http.Request) {
	if !s.acl.Enabled() {
		s.writeError(w, r, fmt.Errorf("%w: this agent runs without --acl; start every agent with --acl (or acl: true in the config file), then bootstrap", ErrACLDisabled))
		return
	}
	tok, secret, err := s.mint(r.Context(), "bootstrap", []fsm.ACLRole{{Role: RoleManagement}}, nil,
		fsm.CmdACLBootstrap, func(t fsm.ACLToken) any { return fsm.ACLBootstrap{Token: t} })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tok.CreatedAt = s.clock.Now().UTC()
	s.log.InfoContext(r.Context(), "ACL bootstrapped", "accessor", tok.AccessorID)
	writeJSON(w, http.StatusCreated, NewToken{TokenInfo: tokenInfo(&tok, s.clock.Now()), Secret: secret})
}

// checkRoles validates roles: namespaced roles need a namespace (a name
// or "*"), cluster-wide ones must not have one.
func checkRoles(roles []fsm.ACLRole) error {
	if len(roles) == 0 {
		return invalid("roles", "at least one role is required (read, submit, write, exec with a namespace; operator; management)")
	}
	for i, rl := range roles {
		f := fmt.Sprintf("roles[%d]", i)
		switch rl.Role {
		case RoleRead, RoleSubmit, RoleWrite, RoleExec:
			if rl.Namespace == "" {
				return invalid(f+".namespace", "role %s needs a namespace (a name, or \"*\" for every namespace)", rl.Role)
			}
			if rl.Namespace != AllNamespaces {
				if err := CheckNamespace(f+".namespace", rl.Namespace); err != nil {
					return err
				}
			}
		case RoleOperator, RoleManagement:
			if rl.Namespace != "" {
				return invalid(f+".namespace", "role %s is cluster-wide and takes no namespace", rl.Role)
			}
		case RoleClient:
			if rl.Namespace != "" {
				return invalid(f+".namespace", "role client is for a node and takes no namespace")
			}
			if rl.Node == "" {
				return invalid(f+".node", "role client needs the node it speaks for (a client agent's name, or \"*\" for any)")
			}
			if rl.Node != AllNamespaces {
				if err := fsm.ValidNodeName(rl.Node); err != nil {
					return invalid(f+".node", "%v", err)
				}
			}
		default:
			return invalid(f+".role", "unknown role %q (want read, submit, write, exec, operator, management or client)", rl.Role)
		}
		if rl.Node != "" && rl.Role != RoleClient {
			return invalid(f+".node", "only the client role names a node")
		}
	}
	return nil
}

func (s *server) createToken(w http.ResponseWriter, r *http.Request) {
	if !s.acl.Enabled() {
		s.writeError(w, r, fmt.Errorf("%w: tokens are only used with --acl", ErrACLDisabled))
		return
	}
	var in TokenRequest
	if err := s.decodeOptional(w, r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkRoles(in.Roles); err != nil {
		s.writeError(w, r, err)
		return
	}
	for i := range in.Roles {
		in.Roles[i].Namespace = fsm.StoredNamespace(in.Roles[i].Namespace)
		if in.Roles[i].Namespace == "" && rank[in.Roles[i].Role] > 0 {
			in.Roles[i].Namespace = fsm.DefaultNamespace // a grant names its namespace in full
		}
	}
	if len(in.Name) > MaxNameLen {
		s.writeError(w, r, invalid("name", "must be at most %d characters", MaxNameLen))
		return
	}
	now := s.clock.Now().UTC()
	exp := in.ExpiresAt
	switch {
	case in.TTL != "" && exp != nil:
		s.writeError(w, r, invalid("ttl", "give ttl or expires_at, not both"))
		return
	case in.TTL != "":
		d, err := time.ParseDuration(in.TTL)
		if err != nil || d <= 0 {
			s.writeError(w, r, invalid("ttl", "%q is not a positive duration such as 1h or 30m", in.TTL))
			return
		}
		e := now.Add(d)
		exp = &e
	case exp != nil && !exp.After(now):
		s.writeError(w, r, invalid("expires_at", "%s is in the past", exp.UTC().Format(time.RFC3339)))
		return
	}
	if exp != nil {
		e := exp.UTC()
		exp = &e
	}
	tok, secret, err := s.mint(r.Context(), in.Name, in.Roles, exp,
		fsm.CmdACLCreateToken, func(t fsm.ACLToken) any { return fsm.ACLCreateToken{Token: t} })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tok.CreatedAt = now
	s.log.InfoContext(r.Context(), "token created", "accessor", tok.AccessorID, "roles", describeRoles(tok.Roles))
	writeJSON(w, http.StatusCreated, NewToken{TokenInfo: tokenInfo(&tok, now), Secret: secret})
}

func (s *server) listTokens(w http.ResponseWriter, r *http.Request) {
	var toks []fsm.ACLToken
	if err := s.state.View(func(tx *fsm.Tx) error {
		var err error
		toks, err = tx.ACLTokens()
		return err
	}); err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.clock.Now()
	out := TokenList{Tokens: []TokenInfo{}}
	for i := range toks {
		out.Tokens = append(out.Tokens, tokenInfo(&toks[i], now))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) revokeToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("accessor")
	if _, err := s.apply(r.Context(), fsm.CmdACLRevokeToken, fsm.ACLRevokeToken{AccessorID: id}); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "token revoked", "accessor", id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) tokenSelf(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	if id == nil || id.token == nil {
		s.writeError(w, r, fmt.Errorf("%w: ACL is off on this agent, so requests carry no token", ErrACLDisabled))
		return
	}
	writeJSON(w, http.StatusOK, tokenInfo(id.token, s.clock.Now()))
}
