package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// Access control (issue 16, docs/security.md). With ACL on, every route
// but the open ones needs a bearer token whose roles grant the route's
// permission (acl_routes.go). The guard checks that the token holds the
// permission somewhere; a handler that touches a namespaced object checks
// it again for that object's namespace (server.allow).

// Permission is what a route needs.
type Permission string

const (
	PermOpen       Permission = "open"       // no token, ACL or not
	PermToken      Permission = "token"      // any valid token
	PermRead       Permission = "read"       // per namespace
	PermSubmit     Permission = "submit"     // per namespace: read + submit/cancel/retry jobs
	PermWrite      Permission = "write"      // per namespace: submit + schedules, workflows, queues
	PermExec       Permission = "exec"       // per namespace: run commands inside live attempts (foreman exec); implied by no other role but management
	PermOperator   Permission = "operator"   // cluster-wide: nodes, drain, raft, snapshots, metrics
	PermManagement Permission = "management" // cluster-wide: tokens; implies every other permission
	PermInternal   Permission = "internal"   // node-to-node only: the cluster-internal secret
	// PermClient: what a client agent calls on a server (its work stream,
	// its reports, a parent's artifact, a checkpoint): the cluster-internal
	// secret, or a token with the client role for the node the path names.
	PermClient Permission = "client"
)

// The fixed roles a token can carry. read, submit and write are per
// namespace ("*" = every namespace); operator and management are
// cluster-wide. Each of read, submit, write includes the ones before it;
// exec includes nothing and nothing but management includes it.
const (
	RoleRead       = "read"
	RoleSubmit     = "submit"
	RoleWrite      = "write"
	RoleExec       = "exec" // PermExec in a namespace, on its own: a token that also submits holds both roles
	RoleOperator   = "operator"
	RoleManagement = "management"
	// RoleClient is a client agent's: cluster-wide, for one node (or "*").
	RoleClient = "client"
)

// AllNamespaces in a role (or ?namespace=) means every namespace.
const AllNamespaces = "*"

// rank orders the namespaced permissions and roles.
// An exec token also reads its namespace's jobs: finding the attempt to
// exec into (a gang's task, an array's index) and seeing it run.
var rank = map[string]int{RoleRead: 1, RoleExec: 1, RoleSubmit: 2, RoleWrite: 3}

// Headers of the ACL.
const (
	// HeaderInternalToken carries the cluster-internal secret on
	// node-to-node requests to /v1/internal/.
	HeaderInternalToken = "X-Foreman-Internal-Token"
	// HeaderClientKey carries fsm.ClientKey on a server's requests to a
	// client agent's port, which checks it against the key its server
	// sent it (a client never sees the internal secret).
	HeaderClientKey = "X-Foreman-Client-Key"
)

var (
	// ErrUnauthenticated means no usable token: missing, malformed,
	// unknown (revoked) or expired. 401.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden means the token is valid but lacks the permission. 403.
	ErrForbidden = errors.New("permission denied")
	// ErrACLDisabled means an ACL endpoint was called on an agent without --acl.
	ErrACLDisabled = errors.New("ACL disabled")
)

// ACL authenticates requests against the tokens in the replicated state.
// One per agent, shared by the API and the agent's own routes (UI, pprof,
// /v1/internal/), so every route goes through the same table.
type ACL struct {
	enabled bool
	state   State
	clock   Clock
	log     *slog.Logger

	mu       sync.Mutex
	patterns []string // every pattern registered through Handle
}

// NewACL returns the guard; with enabled false it lets everything through
// (and still refuses patterns missing from the route table).
func NewACL(enabled bool, state State, clock Clock, log *slog.Logger) *ACL {
	if clock == nil {
		clock = systemClock{}
	}
	if log == nil {
		log = slog.Default()
	}
	return &ACL{enabled: enabled, state: state, clock: clock, log: log.With("component", "acl")}
}

// Enabled reports whether tokens are required.
func (a *ACL) Enabled() bool { return a != nil && a.enabled }

// Handle registers h on m under pattern behind the permission Routes gives
// the pattern. A pattern missing from Routes panics: a route without an
// entry must not start unguarded.
func (a *ACL) Handle(m *http.ServeMux, pattern string, h http.Handler) {
	rule, ok := Routes[pattern]
	if !ok {
		panic(fmt.Sprintf("httpapi: route %q has no entry in the ACL route table (httpapi/acl_routes.go)", pattern))
	}
	a.mu.Lock()
	a.patterns = append(a.patterns, pattern)
	a.mu.Unlock()
	m.Handle(pattern, a.guard(rule.Perm, h))
}

// Patterns lists every pattern registered through Handle, sorted.
func (a *ACL) Patterns() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]string(nil), a.patterns...)
	sort.Strings(out)
	return out
}

// identity is who a request authenticated as.
type identity struct {
	token    *fsm.ACLToken // nil for the cluster-internal credential
	internal bool
}

type identityKey struct{}

func (a *ACL) guard(perm Permission, h http.Handler) http.Handler {
	if perm == PermOpen {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.enabled {
			h.ServeHTTP(w, r)
			return
		}
		id, err := a.authenticate(r, perm)
		switch {
		case err != nil || id.internal:
		case perm == PermClient:
			err = id.allowClient(r.PathValue("node"))
		default:
			err = id.allow(perm, "")
		}
		if err != nil {
			a.refuse(w, r, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

// refuse answers 401/403; the log names the route and the token's
// accessor, never the secret.
func (a *ACL) refuse(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusFor(err)
	a.log.InfoContext(r.Context(), "request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "status", status, "reason", err.Error())
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="foreman"`)
	}
	if r.ContentLength < 0 {
		// A body of unknown length (a client's work stream never ends):
		// net/http would read up to 256 KiB of it before this reply.
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, status, ErrorBody{Error: err.Error(), Code: code})
}

// HashSecret is how a token's secret is stored: hex SHA-256.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// checkInternal verifies the cluster-internal secret r carries.
func (a *ACL) checkInternal(r *http.Request) error {
	got := r.Header.Get(HeaderInternalToken)
	if got == "" {
		return fmt.Errorf("%w: %s is for cluster nodes only (no %s header)", ErrUnauthenticated, r.URL.Path, HeaderInternalToken)
	}
	var want, prev string
	_ = a.state.View(func(tx *fsm.Tx) error { want, prev = tx.ACLInternalSecret(), tx.ACLInternalPrevious(); return nil })
	if want == "" {
		return fmt.Errorf("%w: this node has no cluster-internal secret yet (the leader sets one when it takes office); retry", ErrUnauthenticated)
	}
	// The secret before the last rotation is still good: a sender that
	// has not applied the rotation yet sends it.
	okCur := subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
	okPrev := prev != "" && subtle.ConstantTimeCompare([]byte(got), []byte(prev)) == 1
	if !okCur && !okPrev {
		return fmt.Errorf("%w: %s header does not match this cluster's internal secret", ErrUnauthenticated, HeaderInternalToken)
	}
	return nil
}

// fromNode reports whether r was proxied here by another node of the
// cluster: marked forwarded and, with ACL on, carrying the internal
// secret (a user cannot pass a request off as a node's).
func (a *ACL) fromNode(r *http.Request) bool {
	if r.Header.Get(HeaderForwarded) == "" {
		return false
	}
	return !a.Enabled() || a.checkInternal(r) == nil
}

func (a *ACL) authenticate(r *http.Request, perm Permission) (*identity, error) {
	if perm == PermInternal || perm == PermClient && r.Header.Get(HeaderInternalToken) != "" {
		if err := a.checkInternal(r); err != nil {
			return nil, err
		}
		return &identity{internal: true}, nil
	}
	secret, err := bearer(r)
	if err != nil {
		return nil, err
	}
	var tok *fsm.ACLToken
	err = a.state.View(func(tx *fsm.Tx) error {
		var err error
		tok, err = tx.ACLTokenByHash(HashSecret(secret))
		return err
	})
	if errors.Is(err, fsm.ErrNotFound) {
		return nil, fmt.Errorf("%w: token not recognised (revoked, never issued, or not yet replicated to this node)", ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	if now := a.clock.Now(); tok.Expired(now) {
		return nil, fmt.Errorf("%w: token %s expired at %s", ErrUnauthenticated, tok.AccessorID, tok.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return &identity{token: tok}, nil
}

// bearer reads the secret from "Authorization: Bearer SECRET".
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", fmt.Errorf("%w: no token: send \"Authorization: Bearer <secret>\" (foreman --token or FOREMAN_TOKEN)", ErrUnauthenticated)
	}
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" || strings.ContainsAny(strings.TrimSpace(secret), " \t") {
		return "", fmt.Errorf("%w: Authorization header: want \"Bearer <secret>\"", ErrUnauthenticated)
	}
	return strings.TrimSpace(secret), nil
}

// allow reports whether the identity holds perm. ns is the namespace of
// the object ("" = in some namespace, the guard's check; "*" = in every
// namespace, which only a "*" grant gives).
func (id *identity) allow(perm Permission, ns string) error {
	if id == nil || id.internal {
		return nil
	}
	for _, role := range id.token.Roles {
		if role.Role == RoleManagement {
			return nil
		}
		switch perm {
		case PermToken:
			return nil
		case PermOperator:
			if role.Role == RoleOperator {
				return nil
			}
		case PermRead, PermSubmit, PermWrite:
			if rank[role.Role] >= rank[string(perm)] && (ns == "" || role.Namespace == AllNamespaces || role.Namespace == ns) {
				return nil
			}
		case PermExec:
			if role.Role == RoleExec && (ns == "" || role.Namespace == AllNamespaces || role.Namespace == ns) {
				return nil
			}
		}
	}
	where := ""
	switch {
	case ns == AllNamespaces:
		where = " on every namespace (a grant for \"*\")"
	case ns != "":
		where = fmt.Sprintf(" on namespace %q", ns)
	}
	return fmt.Errorf("%w: this needs the %s permission%s; token %s has %s", ErrForbidden, perm, where, id.token.AccessorID, describeRoles(id.token.Roles))
}

// allowClient reports whether a token may act as the client agent node
// ("" when the route names none: any client role will do).
func (id *identity) allowClient(node string) error {
	for _, role := range id.token.Roles {
		if role.Role == RoleManagement || role.Role == RoleClient && (node == "" || role.Node == AllNamespaces || role.Node == node) {
			return nil
		}
	}
	what := "a client agent's token (role client)"
	if node != "" {
		what = fmt.Sprintf("the token of client agent %q (role client:%s or client:*)", node, node)
	}
	return fmt.Errorf("%w: this needs the client permission: %s; token %s has %s", ErrForbidden, what, id.token.AccessorID, describeRoles(id.token.Roles))
}

func describeRoles(roles []fsm.ACLRole) string {
	parts := make([]string, len(roles))
	for i, r := range roles {
		parts[i] = api.ACLRole(r).String()
	}
	return strings.Join(parts, ", ")
}

// allow checks perm for namespace ns (stored or display form) against the
// request's identity; nil when ACL is off.
func (s *server) allow(r *http.Request, perm Permission, ns string) error {
	if !s.acl.Enabled() {
		return nil
	}
	id, _ := r.Context().Value(identityKey{}).(*identity)
	if id == nil {
		return fmt.Errorf("%w: no identity on the request", ErrUnauthenticated)
	}
	if ns != AllNamespaces {
		ns = fsm.NamespaceOf(ns)
	}
	return id.allow(perm, ns)
}

// identityOf returns the request's identity (nil with ACL off).
func identityOf(r *http.Request) *identity {
	id, _ := r.Context().Value(identityKey{}).(*identity)
	return id
}

// InternalSecret is the cluster-internal secret this node presents to
// another's /v1/internal/ endpoints ("" before an ACL leader set one). It
// is sent even by an agent without --acl, so a rolling restart that turns
// ACL on keeps forwarding working. cluster.Config.InternalAuth calls it
// through SetInternalAuth.
func (a *ACL) InternalSecret() string {
	if a == nil || a.state == nil {
		return ""
	}
	var s string
	_ = a.state.View(func(tx *fsm.Tx) error { s = tx.ACLInternalSecret(); return nil })
	return s
}

// ClientKey is the key this node presents to the client agent node under
// ACL (fsm.ClientKey); "" with ACL off or before the leader set a secret.
func (a *ACL) ClientKey(node string) string {
	if !a.Enabled() {
		return ""
	}
	return fsm.ClientKey(a.InternalSecret(), node)
}

// SetClientKey adds the key this node presents to the client agent node
// (ClientKey) to h; nothing with ACL off.
func (a *ACL) SetClientKey(h http.Header, node string) {
	if key := a.ClientKey(node); key != "" {
		h.Set(HeaderClientKey, key)
	}
}

// SetInternalAuth adds the cluster-internal secret to h (a node-to-node
// request's headers) once the state holds one.
func (a *ACL) SetInternalAuth(h http.Header) {
	if s := a.InternalSecret(); s != "" {
		h.Set(HeaderInternalToken, s)
	}
}

// jobScoped runs h after checking perm on the namespace of the job named
// by the path's {id}; an unknown job goes on to h (its 404). With ACL off
// it costs nothing.
func (s *server) jobScoped(perm Permission, h http.HandlerFunc) http.HandlerFunc {
	return s.scoped(perm, h, func(tx *fsm.Tx, id string) (string, error) {
		sp, err := tx.JobSpec(id)
		if err != nil {
			return "", err
		}
		return sp.Namespace, nil
	})
}

// workflowScoped is jobScoped for the workflow named by {id}.
func (s *server) workflowScoped(perm Permission, h http.HandlerFunc) http.HandlerFunc {
	return s.scoped(perm, h, func(tx *fsm.Tx, id string) (string, error) {
		wf, err := tx.Workflow(id)
		if err != nil {
			return "", err
		}
		return wf.Namespace, nil
	})
}

// scoped checks perm on the namespace that namespaceOf finds for the
// path's {id} before h; an object it cannot find goes on to h.
func (s *server) scoped(perm Permission, h http.HandlerFunc, namespaceOf func(tx *fsm.Tx, id string) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.acl.Enabled() {
			var ns string
			found := false
			_ = s.state.View(func(tx *fsm.Tx) error {
				n, err := namespaceOf(tx, r.PathValue("id"))
				ns, found = n, err == nil
				return nil
			})
			if found {
				if err := s.allow(r, perm, ns); err != nil {
					s.acl.refuse(w, r, err)
					return
				}
			}
		}
		h(w, r)
	}
}
