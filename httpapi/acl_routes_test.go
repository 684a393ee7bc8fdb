package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// aclTestTokens are the secrets the ACL tests use, by name.
var aclTestTokens = map[string][]fsm.ACLRole{
	"read":       {{Role: RoleRead, Namespace: AllNamespaces}},
	"submit":     {{Role: RoleSubmit, Namespace: AllNamespaces}},
	"write":      {{Role: RoleWrite, Namespace: AllNamespaces}},
	"operator":   {{Role: RoleOperator}},
	"management": {{Role: RoleManagement}},
	"submit-a":   {{Role: RoleSubmit, Namespace: "a"}},
	"read-a":     {{Role: RoleRead, Namespace: "a"}},
	"client":     {{Role: RoleClient, Node: AllNamespaces}},
	"client-c9":  {{Role: RoleClient, Node: "c9"}},
}

func secretFor(name string) string { return SecretPrefix + "test-" + name }

// newACLAPI starts a leader API node with ACL on and the tokens above
// (plus "expired", expired an hour before t0) in its state.
func newACLAPI(t *testing.T) (*testAPI, *server) {
	t.Helper()
	f := openFSM(t)
	cfg := DefaultConfig()
	cfg.ACL = true
	a := &testAPI{t: t, f: f, logs: &fakeLogs{logs: map[string]string{}}}
	a.cluster = &fakeCluster{t: t, name: "n1", f: f, leader: true}
	h := New(cfg, Deps{Cluster: a.cluster, State: f, Logs: a.logs, Clock: fixedClock{t0}, Logger: slog.New(slog.DiscardHandler)})
	a.srv = httptest.NewServer(h)
	t.Cleanup(a.srv.Close)
	a.cluster.leaderName, a.cluster.leaderAddr = "n1", strings.TrimPrefix(a.srv.URL, "http://")
	for name, roles := range aclTestTokens {
		a.cluster.must(fsm.CmdACLCreateToken, fsm.ACLCreateToken{Token: fsm.ACLToken{
			AccessorID: "acc-" + name, Name: name, SecretHash: HashSecret(secretFor(name)), Roles: roles}})
	}
	past := t0.Add(-time.Hour)
	a.cluster.must(fsm.CmdACLCreateToken, fsm.ACLCreateToken{Token: fsm.ACLToken{
		AccessorID: "acc-expired", SecretHash: HashSecret(secretFor("expired")), Roles: []fsm.ACLRole{{Role: RoleManagement}}, ExpiresAt: &past}})
	a.cluster.must(fsm.CmdACLInternal, fsm.ACLInternal{Secret: strings.Repeat("i", 40)})
	return a, h.(*server)
}

// send makes one request with a bearer secret ("" = none) and returns the
// status and body; a stream (SSE) is cut once the headers are in.
func (a *testAPI) send(method, path, secret string, hdr ...string) (int, string) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.srv.URL+path, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// wants says which test tokens a permission admits.
var wants = map[Permission][]string{
	PermOpen:       {"read", "submit", "write", "operator", "management", "client"},
	PermToken:      {"read", "submit", "write", "operator", "management", "client"},
	PermRead:       {"read", "submit", "write", "management"},
	PermSubmit:     {"submit", "write", "management"},
	PermWrite:      {"write", "management"},
	PermExec:       {"management"}, // no other role implies exec
	PermOperator:   {"operator", "management"},
	PermManagement: {"management"},
	PermInternal:   {},
	PermClient:     {"client", "management"},
}

// routeRequest turns a pattern into a method and a path that reaches it.
func routeRequest(pattern, jobID string) (string, string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	if path == "/" {
		path = "/v1/no-such-route"
	}
	r := strings.NewReplacer("{id}", jobID, "{name}", "x", "{node}", "c1", "{accessor}", "no-such-token", "{$}", "")
	return method, r.Replace(path)
}

// TestACLRouteWalk sends every registered route with no token, a
// malformed header, an unknown, an expired and each role's token, and
// checks 401 / 403 / anything else against the route table.
func TestACLRouteWalk(t *testing.T) {
	a, s := newACLAPI(t)
	code, body := a.do("POST", "/v1/jobs", `{"command":"true","allow_unplaceable":true}`, "Authorization", "Bearer "+secretFor("management"))
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var sr SubmitResponse
	mustJSON(t, body, &sr)

	patterns := s.acl.Patterns()
	if len(patterns) < 40 {
		t.Fatalf("only %d patterns registered: %v", len(patterns), patterns)
	}
	for _, p := range patterns {
		rule := Routes[p]
		method, path := routeRequest(p, sr.ID)
		t.Run(p, func(t *testing.T) {
			if rule.Perm != PermOpen {
				for _, bad := range []struct{ name, secret string }{{"none", ""}, {"unknown", "fmn_not-a-token"}, {"expired", secretFor("expired")}} {
					if code, body := a.send(method, path, bad.secret); code != http.StatusUnauthorized {
						t.Errorf("%s token: %d %s, want 401", bad.name, code, body)
					}
				}
				if code, body := a.send(method, path, "", "Authorization", "Token "+secretFor("management")); code != http.StatusUnauthorized || (rule.Perm != PermInternal && !strings.Contains(body, "Bearer")) {
					t.Errorf("wrong header format: %d %s, want 401 naming Bearer", code, body)
				}
			}
			for _, role := range []string{"read", "submit", "write", "operator", "management", "client"} {
				code, body := a.send(method, path, secretFor(role))
				allowed := false
				for _, w := range wants[rule.Perm] {
					allowed = allowed || w == role
				}
				switch {
				case allowed && (code == http.StatusUnauthorized || code == http.StatusForbidden):
					t.Errorf("role %s: %d %s, want it let through", role, code, body)
				case !allowed && rule.Perm == PermInternal && code != http.StatusUnauthorized:
					t.Errorf("role %s on an internal route: %d %s, want 401", role, code, body)
				case !allowed && rule.Perm != PermInternal && (code != http.StatusForbidden || !strings.Contains(body, "needs the "+string(rule.Perm)+" permission")):
					t.Errorf("role %s: %d %s, want 403 naming %s", role, code, body, rule.Perm)
				}
				if strings.Contains(body, secretFor(role)) {
					t.Errorf("role %s: the reply echoes the secret: %s", role, body)
				}
			}
			if rule.Perm == PermClient && strings.Contains(p, "{node}") {
				// A client's token speaks for its own node only.
				if code, body := a.send(method, path, secretFor("client-c9")); code != http.StatusForbidden || !strings.Contains(body, `client agent "c1"`) {
					t.Errorf("the token of client c9 on c1's route: %d %s, want 403 naming c1", code, body)
				}
			}
			if rule.Perm == PermInternal || rule.Perm == PermClient {
				if code, body := a.send(method, path, "", HeaderInternalToken, strings.Repeat("i", 40)); code == http.StatusUnauthorized || code == http.StatusForbidden {
					t.Errorf("internal secret: %d %s, want it let through", code, body)
				}
				if code, _ := a.send(method, path, "", HeaderInternalToken, strings.Repeat("x", 40)); code != http.StatusUnauthorized {
					t.Errorf("wrong internal secret: %d, want 401", code)
				}
			}
		})
	}
}

// TestACLRoutesHaveEntries: every route the API registers has a table
// entry (Handle panics otherwise, so New would not return) and no entry
// is stale: those the API does not register are the agent's own.
func TestACLRoutesHaveEntries(t *testing.T) {
	_, s := newACLAPI(t)
	got := map[string]bool{}
	for _, p := range s.acl.Patterns() {
		got[p] = true
	}
	agentOwn := map[string]bool{"/v1/internal/": true, "POST /v1/internal/work/{node}": true, "POST /v1/internal/reports/{node}": true, "GET /v1/internal/voters": true, "/v1/internal/submits": true, "/v1/internal/artifacts/": true, "GET /v1/internal/checkpoints/{name}": true, "/ui/": true, "GET /{$}": true,
		"/debug/pprof/": true, "/debug/pprof/cmdline": true, "/debug/pprof/profile": true, "/debug/pprof/symbol": true, "/debug/pprof/trace": true}
	for p := range Routes {
		if !got[p] && !agentOwn[p] {
			t.Errorf("route table entry %q is registered nowhere (stale?)", p)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a pattern without a table entry did not panic")
		}
	}()
	s.acl.Handle(http.NewServeMux(), "GET /v1/not-in-the-table", http.NotFoundHandler())
}

// TestRoutesOnlyThroughACL: no file registers a route except through
// ACL.Handle, so nothing can bypass the table.
func TestRoutesOnlyThroughACL(t *testing.T) {
	for _, dir := range []string{".", filepath.Join("..", "cli", "agent")} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || filepath.Base(f) == "acl.go" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, ".HandleFunc(") || (strings.Contains(line, "mux.Handle(") || strings.Contains(line, "m.Handle(")) && !strings.Contains(line, "acl.Handle(") {
					t.Errorf("%s:%d registers a route outside ACL.Handle: %s", f, i+1, strings.TrimSpace(line))
				}
			}
		}
	}
}

// TestACLNamespaces: a submit token for namespace a submits there, is
// refused in b and in default, cannot read b's jobs by ID, and a read
// token cannot submit.
func TestACLNamespaces(t *testing.T) {
	a, _ := newACLAPI(t)
	mgmt, subA, readA := secretFor("management"), secretFor("submit-a"), secretFor("read-a")
	post := func(path, body, secret string) (int, string) {
		return a.do("POST", path, body, "Authorization", "Bearer "+secret)
	}
	code, body := post("/v1/jobs?namespace=a", `{"command":"true","allow_unplaceable":true}`, subA)
	if code != http.StatusCreated {
		t.Fatalf("submit in a: %d %s", code, body)
	}
	var inA SubmitResponse
	mustJSON(t, body, &inA)
	if ns := a.job(inA.ID).Spec.Namespace; ns != "a" {
		t.Fatalf("job namespace %q, want a", ns)
	}
	for _, tc := range []struct{ path, body string }{
		{"/v1/jobs?namespace=b", `{"command":"true"}`},
		{"/v1/jobs", `{"command":"true"}`},
		{"/v1/jobs", `{"command":"true","namespace":"b"}`},
		{"/v1/jobs?namespace=a", `{"jobs":[{"command":"true","namespace":"a"},{"command":"true","namespace":"b"}]}`},
	} {
		code, body := post(tc.path, tc.body, subA)
		if code != http.StatusForbidden && code != http.StatusBadRequest {
			t.Errorf("submit-a POST %s %s: %d %s, want 403 (or 400 for a mismatch)", tc.path, tc.body, code, body)
		}
	}
	if code, body := post("/v1/jobs?namespace=b", `{"command":"true"}`, subA); code != http.StatusForbidden || !strings.Contains(body, `submit permission on namespace \"b\"`) {
		t.Errorf("submit in b: %d %s, want 403 naming submit on b", code, body)
	}
	if code, body := post("/v1/jobs?namespace=a", `{"command":"true"}`, readA); code != http.StatusForbidden {
		t.Errorf("read token submits: %d %s, want 403", code, body)
	}
	code, body = post("/v1/jobs?namespace=b", `{"command":"true","allow_unplaceable":true}`, mgmt)
	if code != http.StatusCreated {
		t.Fatalf("submit in b: %d %s", code, body)
	}
	var inB SubmitResponse
	mustJSON(t, body, &inB)
	for _, p := range []string{"/v1/jobs/" + inB.ID, "/v1/jobs/" + inB.ID + "/logs", "/v1/jobs/" + inB.ID + "/result", "/v1/jobs/" + inB.ID + "/events"} {
		if code, body := a.send("GET", p, readA); code != http.StatusForbidden {
			t.Errorf("read-a GET %s: %d %s, want 403", p, code, body)
		}
	}
	if code, body := a.send("POST", "/v1/jobs/"+inB.ID+"/cancel", subA); code != http.StatusForbidden {
		t.Errorf("submit-a cancels b's job: %d %s, want 403", code, body)
	}
	if code, body := a.send("GET", "/v1/jobs/"+inA.ID, readA); code != http.StatusOK {
		t.Errorf("read-a GET its job: %d %s", code, body)
	}
	// Listings are per namespace.
	code, body = a.send("GET", "/v1/jobs?namespace=a", readA)
	if code != http.StatusOK || !strings.Contains(body, inA.ID) || strings.Contains(body, inB.ID) {
		t.Errorf("list a: %d %s", code, body)
	}
	if code, _ := a.send("GET", "/v1/jobs?namespace=b", readA); code != http.StatusForbidden {
		t.Errorf("read-a lists b: %d, want 403", code)
	}
	if code, _ := a.send("GET", "/v1/jobs?namespace=*", readA); code != http.StatusForbidden {
		t.Errorf("read-a lists every namespace: %d, want 403", code)
	}
	code, body = a.send("GET", "/v1/jobs?namespace=*", mgmt)
	if code != http.StatusOK || !strings.Contains(body, inA.ID) || !strings.Contains(body, inB.ID) {
		t.Errorf("management lists every namespace: %d %s", code, body)
	}
	// Idempotency keys are per namespace.
	k1, _ := post("/v1/jobs?namespace=a", `{"command":"true","idempotency_key":"k","allow_unplaceable":true}`, mgmt)
	code, body = post("/v1/jobs?namespace=b", `{"command":"true","idempotency_key":"k","allow_unplaceable":true}`, mgmt)
	if k1 != http.StatusCreated || code != http.StatusCreated {
		t.Errorf("same idempotency key in two namespaces: %d then %d %s, want two new jobs", k1, code, body)
	}
}

// TestACLTokens: bootstrap once, create with roles and ttl, revoke, and
// the secret never stored or listed.
func TestACLTokens(t *testing.T) {
	f := openFSM(t)
	cfg := DefaultConfig()
	cfg.ACL = true
	a := newTestAPIOn(t, f, "n1", true, func(c *Config) { c.ACL = true })
	ctx := context.Background()
	boot, err := a.client.ACLBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(boot.Secret, SecretPrefix) || boot.Roles[0].Role != RoleManagement {
		t.Fatalf("bootstrap: %+v", boot)
	}
	if code, body := a.do("POST", "/v1/acl/bootstrap", ""); code != http.StatusConflict || !strings.Contains(body, "already bootstrapped") {
		t.Errorf("second bootstrap: %d %s, want 409 already bootstrapped", code, body)
	}
	mc := apiClient(t, a.srv.URL, boot.Secret)
	tok, err := mc.CreateToken(ctx, api.TokenSpec{Name: "ci", Roles: []api.ACLRole{{Role: RoleSubmit, Namespace: "a"}}, TTL: api.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !tok.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("expires_at %v, want %v", tok.ExpiresAt, t0.Add(time.Hour))
	}
	for _, bad := range []string{`{"roles":[{"role":"submit"}]}`, `{"roles":[{"role":"operator","namespace":"a"}]}`, `{"roles":[{"role":"root"}]}`, `{"roles":[]}`, `{"roles":[{"role":"read","namespace":"a"}],"ttl":"-1h"}`} {
		if code, body := a.do("POST", "/v1/acl/tokens", bad, "Authorization", "Bearer "+boot.Secret); code != http.StatusBadRequest {
			t.Errorf("create %s: %d %s, want 400", bad, code, body)
		}
	}
	l, err := mc.ListTokens(ctx)
	if err != nil || len(l) != 2 {
		t.Fatalf("list: %v %+v", err, l)
	}
	// Only hashes in the state.
	var raw []fsm.ACLToken
	_ = f.View(func(tx *fsm.Tx) error { raw, _ = tx.ACLTokens(); return nil })
	for _, r := range raw {
		if strings.Contains(r.SecretHash, boot.Secret) || strings.Contains(r.SecretHash, tok.Secret) || r.SecretHash == "" {
			t.Errorf("stored token %s holds %q", r.AccessorID, r.SecretHash)
		}
	}
	sc := apiClient(t, a.srv.URL, tok.Secret)
	if self, err := sc.TokenSelf(ctx); err != nil || self.AccessorID != tok.AccessorID {
		t.Errorf("self: %v %+v", err, self)
	}
	if err := mc.DeleteToken(ctx, tok.AccessorID); err != nil {
		t.Fatal(err)
	}
	code, body := a.send("GET", "/v1/acl/token/self", tok.Secret)
	if code != http.StatusUnauthorized || !strings.Contains(body, "not recognised") {
		t.Errorf("revoked token: %d %s, want 401", code, body)
	}
	if code, _ := a.send("GET", "/v1/health", ""); code != http.StatusOK {
		t.Errorf("health without a token: %d", code)
	}
}

// TestNamespacedWorkflowsSchedulesEvents: workflows and schedules belong
// to a namespace (their jobs too), names are per namespace, and listings,
// reads by ID and the event stream keep tenants apart.
func TestNamespacedWorkflowsSchedulesEvents(t *testing.T) {
	a, _ := newACLAPI(t)
	mgmt, readA := secretFor("management"), secretFor("read-a")
	auth := func(s string) []string { return []string{"Authorization", "Bearer " + s} }
	code, body := a.do("POST", "/v1/workflows?namespace=b", `{"name":"w","jobs":[{"name":"x","command":"true","allow_unplaceable":true}]}`, auth(mgmt)...)
	if code != http.StatusCreated {
		t.Fatalf("workflow in b: %d %s", code, body)
	}
	var wr WorkflowSubmitResponse
	mustJSON(t, body, &wr)
	if ns := a.job(wr.Jobs[0].ID).Spec.Namespace; ns != "b" {
		t.Errorf("workflow job namespace %q, want b", ns)
	}
	if code, _ := a.send("GET", "/v1/workflows/"+wr.ID, readA); code != http.StatusForbidden {
		t.Errorf("read-a reads b's workflow: %d, want 403", code)
	}
	if code, body := a.send("GET", "/v1/workflows?namespace=a", readA); code != http.StatusOK || strings.Contains(body, wr.ID) {
		t.Errorf("list a's workflows: %d %s", code, body)
	}
	if code, body := a.do("POST", "/v1/workflows?namespace=a", `{"name":"w","namespace":"b","jobs":[{"name":"x","command":"true"}]}`, auth(mgmt)...); code != http.StatusBadRequest {
		t.Errorf("namespace mismatch: %d %s, want 400", code, body)
	}

	// The same schedule name in two namespaces.
	for _, ns := range []string{"a", "b"} {
		code, body := a.do("POST", "/v1/schedules?namespace="+ns, `{"name":"nightly","cron":"@every 1h","job":{"command":"true","allow_unplaceable":true}}`, auth(mgmt)...)
		if code != http.StatusCreated {
			t.Fatalf("schedule in %s: %d %s", ns, code, body)
		}
		var info ScheduleInfo
		mustJSON(t, body, &info)
		if info.Spec.Name != "nightly" || fsm.NamespaceOf(info.Spec.Namespace) != ns || fsm.NamespaceOf(info.Spec.Job.Namespace) != ns {
			t.Errorf("schedule in %s: %+v", ns, info.Spec)
		}
	}
	if code, body := a.send("GET", "/v1/schedules/nightly?namespace=a", readA); code != http.StatusOK {
		t.Errorf("read-a gets a's schedule: %d %s", code, body)
	}
	if code, _ := a.send("GET", "/v1/schedules/nightly?namespace=b", readA); code != http.StatusForbidden {
		t.Errorf("read-a gets b's schedule: %d, want 403", code)
	}
	code, body = a.send("GET", "/v1/schedules?namespace=*", mgmt)
	if code != http.StatusOK || strings.Count(body, `"name": "nightly"`) != 2 {
		t.Errorf("every namespace's schedules: %d %s", code, body)
	}
	if code, _ := a.send("DELETE", "/v1/schedules/nightly?namespace=b", secretFor("write")); code != http.StatusNoContent {
		t.Errorf("delete b's nightly: %d", code)
	}
	if code, _ := a.send("GET", "/v1/schedules/nightly?namespace=a", mgmt); code != http.StatusOK {
		t.Errorf("a's nightly after deleting b's: %d", code)
	}

	// The event stream: read-a sees only a's events.
	filter := &eventFilter{cluster: false, may: func(ns string) bool { return fsm.NamespaceOf(ns) == "a" }}
	for _, tc := range []struct {
		e    fsm.Event
		want bool
	}{
		{fsm.Event{Type: fsm.EventJob, Namespace: "a"}, true},
		{fsm.Event{Type: fsm.EventAttempt, Namespace: "b"}, false},
		{fsm.Event{Type: fsm.EventJob}, false}, // default
		{fsm.Event{Type: fsm.EventNode}, false},
		{fsm.Event{Type: fsm.EventSchedule, Namespace: "a"}, true},
	} {
		if got := filter.match(&tc.e); got != tc.want {
			t.Errorf("read-a stream, %+v: %v, want %v", tc.e, got, tc.want)
		}
	}
	if code, _ := a.send("GET", "/v1/events?namespace=b", readA); code != http.StatusForbidden {
		t.Errorf("read-a streams b: %d, want 403", code)
	}
}

// TestAttemptEventsCarryNamespace: the stream can filter attempt events
// because Apply stamps them with their job's namespace.
func TestAttemptEventsCarryNamespace(t *testing.T) {
	a, _ := newACLAPI(t)
	a.addNode("w1", "", 4000, 4096)
	code, body := a.do("POST", "/v1/jobs?namespace=a", `{"command":"true"}`, "Authorization", "Bearer "+secretFor("management"))
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var sr SubmitResponse
	mustJSON(t, body, &sr)
	ring := a.f.Events()
	pos, _ := ring.Tail()
	a.place(sr.ID, "w1")
	evs, _, _ := ring.Read(pos, make([]fsm.RingEvent, 0, 64))
	seen := 0
	for _, e := range evs {
		if e.JobID == sr.ID {
			seen++
			if e.Namespace != "a" {
				t.Errorf("%s event: namespace %q, want a", e.Kind(), e.Namespace)
			}
		}
	}
	if seen < 2 {
		t.Fatalf("saw %d events of the job: %+v", seen, evs)
	}
}
