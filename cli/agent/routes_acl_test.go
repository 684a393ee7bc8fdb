package agent

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// TestAgentRoutesACL walks the agent's own routes (pprof, UI, internal)
// with ACL on: the UI's static files are open, pprof needs operator, the
// internal endpoints only take the cluster-internal secret.
func TestAgentRoutesACL(t *testing.T) {
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	secrets := map[string]string{"read": "fmn_r", "operator": "fmn_o", "client": "fmn_c"}
	var logs []*raft.Log
	add := func(typ fsm.CommandType, p any) {
		cmd, err := fsm.NewCommand(typ, at, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cmd.Encode()
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: uint64(len(logs) + 1), Term: 1, Type: raft.LogCommand, Data: b})
	}
	add(fsm.CmdACLCreateToken, fsm.ACLCreateToken{Token: fsm.ACLToken{AccessorID: "r", SecretHash: httpapi.HashSecret(secrets["read"]), Roles: []fsm.ACLRole{{Role: "read", Namespace: "*"}}}})
	add(fsm.CmdACLCreateToken, fsm.ACLCreateToken{Token: fsm.ACLToken{AccessorID: "o", SecretHash: httpapi.HashSecret(secrets["operator"]), Roles: []fsm.ACLRole{{Role: "operator"}}}})
	add(fsm.CmdACLCreateToken, fsm.ACLCreateToken{Token: fsm.ACLToken{AccessorID: "c", SecretHash: httpapi.HashSecret(secrets["client"]), Roles: []fsm.ACLRole{{Role: "client", Node: "c1"}}}})
	internal := strings.Repeat("s", 43)
	add(fsm.CmdACLInternal, fsm.ACLInternal{Secret: internal})
	for i, r := range f.ApplyBatch(logs) {
		if res, ok := r.(*fsm.Result); !ok || res.Err != nil {
			t.Fatalf("entry %d: %v", i, r)
		}
	}
	acl := httpapi.NewACL(true, f, nil, nil)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := httptest.NewServer(routes(acl, ok, ok, ok, true, false))
	t.Cleanup(srv.Close)
	var method string
	get := func(path string, hdr ...string) int {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range acl.Patterns() {
		rule := httpapi.Routes[p]
		m, path, found := strings.Cut(p, " ")
		if method = m; !found {
			method, path = http.MethodGet, p
		}
		path = strings.ReplaceAll(path, "{$}", "")
		if path == "/debug/pprof/profile" || path == "/debug/pprof/trace" {
			path += "?seconds=1"
		}
		other := get(strings.ReplaceAll(path, "{node}", "c2"), "Authorization", "Bearer "+secrets["client"])
		path = strings.ReplaceAll(path, "{node}", "c1")
		client := get(path, "Authorization", "Bearer "+secrets["client"])
		none := get(path)
		read := get(path, "Authorization", "Bearer "+secrets["read"])
		op := get(path, "Authorization", "Bearer "+secrets["operator"])
		in := get(path, httpapi.HeaderInternalToken, internal)
		bad := get(path, httpapi.HeaderInternalToken, internal+"x")
		denied := func(c int) bool { return c == http.StatusUnauthorized || c == http.StatusForbidden }
		switch rule.Perm {
		case httpapi.PermOpen:
			if denied(none) {
				t.Errorf("%s (open): %d without a token", p, none)
			}
		case httpapi.PermOperator:
			if none != http.StatusUnauthorized || read != http.StatusForbidden || denied(op) {
				t.Errorf("%s (operator): none %d, read %d, operator %d; want 401, 403, allowed", p, none, read, op)
			}
		case httpapi.PermInternal:
			if none != http.StatusUnauthorized || op != http.StatusUnauthorized || bad != http.StatusUnauthorized || denied(in) || client != http.StatusUnauthorized {
				t.Errorf("%s (internal): none %d, operator %d, wrong secret %d, secret %d; want 401, 401, 401, allowed", p, none, op, bad, in)
			}
		case httpapi.PermClient:
			// A client:c1 token: its own node's routes, and those that name none.
			if none != http.StatusUnauthorized || op != http.StatusForbidden || bad != http.StatusUnauthorized || denied(in) || denied(client) ||
				strings.Contains(p, "{node}") && other != http.StatusForbidden {
				t.Errorf("%s (client): none %d, operator %d, wrong secret %d, secret %d, client:c1 %d, client:c1 for c2 %d; want 401, 403, 401, allowed, allowed, 403",
					p, none, op, bad, in, client, other)
			}
		default:
			t.Errorf("%s: unexpected permission %s on an agent route", p, rule.Perm)
		}
	}
	if len(acl.Patterns()) < 9 {
		t.Errorf("agent registered %d patterns: %v", len(acl.Patterns()), acl.Patterns())
	}
}
