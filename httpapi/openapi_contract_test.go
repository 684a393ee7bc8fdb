package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/foreman-sched/foreman/fsm"
)

// contract is an http.RoundTripper that checks every request a test
// sends, and every answer the server gives, against the description. The
// route comes from the server's own mux, so a request is checked against
// the operation that really serves it.
type contract struct {
	t    *testing.T
	doc  *openapi3.T
	mux  *http.ServeMux
	next http.RoundTripper

	mu   sync.Mutex
	seen map[string]bool // operationId → an answer was checked
}

// newContract loads the description with every object schema closed
// (additionalProperties: false): the published schemas let responses gain
// fields, but a field the server sends that the description does not
// list fails here, so the description stays complete.
func newContract(t *testing.T, s *server) *contract {
	t.Helper()
	doc := loadOpenAPI(t)
	closeSchemas(doc)
	return &contract{t: t, doc: doc, mux: s.mux, next: http.DefaultTransport, seen: map[string]bool{}}
}

// closeSchemas sets additionalProperties: false on every object schema
// that lists properties and says nothing about others.
func closeSchemas(doc *openapi3.T) {
	done := map[*openapi3.Schema]bool{}
	var walk func(r *openapi3.SchemaRef)
	walk = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil || done[r.Value] {
			return
		}
		s := r.Value
		done[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			s.AdditionalProperties.Has = new(false)
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		for _, l := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
			for _, x := range l {
				walk(x)
			}
		}
	}
	for _, r := range doc.Components.Schemas {
		walk(r)
	}
}

// client is an HTTP client whose every exchange is checked.
func (c *contract) client() *http.Client { return &http.Client{Transport: c} }

// route finds the operation the server's mux sends r to, and the path
// parameters, by matching the pattern's segments against the path.
func (c *contract) route(r *http.Request) (*routers.Route, map[string]string, error) {
	_, pattern := c.mux.Handler(r)
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || strings.HasPrefix(path, "/v1/internal/") {
		return nil, nil, nil // the catch-all (404/405) or no contract
	}
	params := map[string]string{}
	pseg, useg := strings.Split(path, "/"), strings.Split(r.URL.Path, "/")
	for i, seg := range pseg {
		if !strings.HasPrefix(seg, "{") || i >= len(useg) {
			continue
		}
		name := strings.Trim(seg, "{}")
		if rest, ok := strings.CutSuffix(name, "..."); ok {
			params[rest] = strings.Join(useg[i:], "/")
			break
		}
		params[name] = useg[i]
	}
	p := openAPIPath(path)
	item := c.doc.Paths.Value(p)
	if item == nil || item.GetOperation(method) == nil {
		return nil, nil, fmt.Errorf("the server routes %s %s to %q, which the description lacks", r.Method, r.URL.Path, pattern)
	}
	return &routers.Route{Spec: c.doc, Path: p, PathItem: item, Method: method, Operation: item.GetOperation(method)}, params, nil
}

func (c *contract) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	reset := func() { r.Body = io.NopCloser(bytes.NewReader(body)) }
	reset()
	route, params, err := c.route(r)
	if err != nil {
		c.t.Error(err)
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults:   true, // never change what the test sends
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	opts.WithCustomSchemaErrorFunc(shortSchemaError)
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	wantValid := r.Header.Get("X-Test-Invalid") == ""
	if route != nil && wantValid {
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			c.t.Errorf("%s %s: the request does not match the description: %v", r.Method, r.URL, err)
		}
		reset()
	}
	resp, err := c.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A stream never ends: check its status and type here, its events
		// with checkEvents.
		if route != nil && route.Operation.Responses.Status(resp.StatusCode) == nil {
			c.t.Errorf("%s %s: status %d is not in the description", r.Method, r.URL, resp.StatusCode)
		}
		c.mark(route)
		return resp, nil
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(got))
	if route == nil {
		// The catch-all answers 404/405 in the error shape.
		c.checkSchema(r, "Error", got)
		return resp, nil
	}
	if resp.StatusCode < 400 && route.Operation.Responses.Status(resp.StatusCode) == nil {
		c.t.Errorf("%s %s: success status %d is not listed in the description", r.Method, r.URL, resp.StatusCode)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: opts}
	out.SetBodyBytes(got)
	if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
		c.t.Errorf("%s %s: the answer %d does not match the description: %v\nbody: %.600s", r.Method, r.URL, resp.StatusCode, err, got)
	}
	c.mark(route)
	return resp, nil
}

func (c *contract) mark(route *routers.Route) {
	if route == nil {
		return
	}
	c.mu.Lock()
	c.seen[route.Operation.OperationID] = true
	c.mu.Unlock()
}

// shortSchemaError says where and why, without kin-openapi's dump of the
// whole schema.
func shortSchemaError(err *openapi3.SchemaError) string {
	return fmt.Sprintf("at /%s: %s", strings.Join(err.JSONPointer(), "/"), err.Reason)
}

// checkSchema validates a JSON body against a component schema.
func (c *contract) checkSchema(r *http.Request, name string, body []byte) {
	c.t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		c.t.Errorf("%s %s: not JSON: %v: %.200s", r.Method, r.URL, err, body)
		return
	}
	if err := c.doc.Components.Schemas[name].Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.SetSchemaErrorMessageCustomizer(shortSchemaError)); err != nil {
		c.t.Errorf("%s %s: the body is not a %s: %v: %.300s", r.Method, r.URL, name, err, body)
	}
}

// call sends one request through the contract and returns the status and
// body. hdr are header name, value pairs.
func (c *contract) call(base, method, path, body string, hdr ...string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.client().Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// checkEvents reads the event stream from raft index 0 until it has seen
// n events and validates each one's data against the Event schema.
func (c *contract) checkEvents(base string, n int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events?index=0", nil)
	resp, err := c.client().Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET /v1/events: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	seen := 0
	for seen < n && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		c.checkSchema(req, "Event", []byte(data))
		seen++
	}
	if seen < n {
		c.t.Errorf("the event stream ended after %d events, want %d: %v", seen, n, sc.Err())
	}
}

// TestOpenAPIContract runs the main routes of a real in-process server
// (a real state machine behind a one-node fake raft) and checks every
// request and answer against the description, errors included.
func TestOpenAPIContract(t *testing.T) {
	a := newTestAPI(t)
	c := newContract(t, a.srv.Config.Handler.(*server))
	base := a.srv.URL
	call := func(want int, method, path, body string, hdr ...string) []byte {
		t.Helper()
		code, b := c.call(base, method, path, body, hdr...)
		if code != want {
			t.Errorf("%s %s: %d %s, want %d", method, path, code, b, want)
		}
		return b
	}
	id := func(b []byte) string {
		var r struct{ ID string }
		_ = json.Unmarshal(b, &r)
		return r.ID
	}
	a.addNode("n1", strings.TrimPrefix(base, "http://"), 4000, 8192)
	a.addNode("w1", "", 8000, 16384)

	// Jobs.
	spec := `{"name":"hello","command":["/bin/sh","-c","echo hi"],"resources":{"cpu":"500m","memory":"64MiB"},"labels":{"team":"data"},"timeout":"1m","backoff":{"initial":"1s","multiplier":2},"notify":[{"url":"https://hooks.example.com/x","events":["finished"],"secret":"s"}],"env":{"A":"1"},"secret_env":{"TOKEN":"t"}}`
	j1 := id(call(http.StatusCreated, "POST", "/v1/jobs", spec, "Idempotency-Key", "k1"))
	call(http.StatusOK, "POST", "/v1/jobs", spec, "Idempotency-Key", "k1")
	call(http.StatusCreated, "POST", "/v1/jobs", `{"jobs":[{"command":"true","queue":"etl"},{"command":["false"],"priority":10,"run_at":"2031-01-01T00:00:00Z"}]}`)
	gang := id(call(http.StatusCreated, "POST", "/v1/jobs", `{"command":"true","gang":{"size":2},"kill_timeout":30}`))
	child := id(call(http.StatusCreated, "POST", "/v1/jobs", `{"command":"true","depends_on":["`+j1+`"],"condition":"always"}`))
	call(http.StatusCreated, "POST", "/v1/jobs", `{"command":"true","after":["`+j1+`:any",{"job":"`+gang+`","on":"failed"}]}`)
	call(http.StatusBadRequest, "POST", "/v1/jobs", `{"command":"true","after":["`+j1+`:sometimes"]}`)
	call(http.StatusCreated, "POST", "/v1/jobs", `{"http":{"url":"https://api.example.com/warm","method":"POST","expect_status":[200,202]}}`)
	call(http.StatusBadRequest, "POST", "/v1/jobs", `{"command":"true","priority":200}`)
	call(http.StatusBadRequest, "POST", "/v1/jobs", `{"command":"true","colour":"red"}`, "X-Test-Invalid", "1")
	call(http.StatusBadRequest, "POST", "/v1/jobs", `{"jobs":[]}`)

	// j1 runs on n1 (this node, so its log is read here) and succeeds.
	tok := a.place(j1, "n1")
	a.logs.logs[j1+"/1/stdout"] = "hi\n"
	a.cluster.must(fsm.CmdReport, fsm.ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: "n1", State: fsm.AttemptRunning, StartedAt: t0})
	a.cluster.must(fsm.CmdReport, fsm.ReportAttempt{JobID: j1, Attempt: 1, FencingToken: tok, Node: "n1", State: fsm.AttemptSucceeded,
		ExitCode: new(0), FinishedAt: t0.Add(time.Second), Result: []byte(`{"rows": 3}`), StderrTail: "done\n",
		Artifacts: []fsm.Artifact{{Path: "out/data.csv", Size: 12}}})
	a.cluster.must(fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: gang, Node: "n1",
		Tasks: []fsm.TaskSlot{{Node: "n1", Port: 31000}, {Node: "w1", Port: 31000}}}}})

	call(http.StatusOK, "GET", "/v1/jobs", "")
	call(http.StatusOK, "GET", "/v1/jobs?state=succeeded&label=team=data&limit=1", "")
	call(http.StatusOK, "GET", "/v1/jobs?limit=1&namespace=*", "")
	call(http.StatusBadRequest, "GET", "/v1/jobs?state=exploded", "", "X-Test-Invalid", "1")
	call(http.StatusOK, "GET", "/v1/jobs/counts", "")
	call(http.StatusOK, "GET", "/v1/jobs/"+j1+"?consistent=true", "")
	call(http.StatusOK, "GET", "/v1/jobs/"+child, "")
	call(http.StatusNotFound, "GET", "/v1/jobs/no-such-job", "")
	call(http.StatusOK, "GET", "/v1/jobs/"+j1+"/events", "")
	call(http.StatusOK, "GET", "/v1/jobs/"+j1+"/logs", "")
	call(http.StatusOK, "GET", "/v1/jobs/"+j1+"/result", "")
	call(http.StatusOK, "GET", "/v1/jobs/"+j1+"/artifacts", "")
	call(http.StatusNotFound, "GET", "/v1/jobs/"+j1+"/artifacts/out/missing.csv", "")
	call(http.StatusOK, "GET", "/v1/jobs/"+gang+"/tasks", "")
	call(http.StatusConflict, "GET", "/v1/jobs/"+j1+"/tasks", "")
	call(http.StatusOK, "POST", "/v1/jobs/"+gang+"/checkpoint", "state", "Content-Type", "application/octet-stream")
	call(http.StatusOK, "GET", "/v1/jobs/"+gang+"/checkpoint", "")
	call(http.StatusOK, "POST", "/v1/jobs/"+gang+"/cancel", `{"reason":"enough"}`)
	call(http.StatusOK, "POST", "/v1/jobs/"+child+"/cancel", "")
	call(http.StatusOK, "POST", "/v1/jobs/"+child+"/retry", "")
	call(http.StatusConflict, "POST", "/v1/jobs/"+j1+"/cancel", "")

	// Workflows.
	wf := `{"name":"etl","jobs":[{"name":"extract","command":"true"},{"name":"load","command":"true","depends_on":["extract"],"condition":"one_success"}]}`
	w := id(call(http.StatusCreated, "POST", "/v1/workflows", wf, "Idempotency-Key", "w1"))
	call(http.StatusOK, "POST", "/v1/workflows", wf, "Idempotency-Key", "w1")
	call(http.StatusBadRequest, "POST", "/v1/workflows", `{"name":"x","jobs":[{"name":"a","command":"true","depends_on":["a"]}]}`)
	call(http.StatusOK, "GET", "/v1/workflows", "")
	call(http.StatusOK, "GET", "/v1/workflows/"+w+"?from=1&limit=1", "")
	call(http.StatusOK, "DELETE", "/v1/workflows/"+w, `{"reason":"test"}`)
	call(http.StatusOK, "POST", "/v1/workflows/"+w+"/retry", "")
	call(http.StatusNotFound, "GET", "/v1/workflows/no-such-workflow", "")

	// Schedules.
	sch := `{"name":"nightly","cron":"30 2 * * *","time_zone":"Europe/Berlin","job":{"command":["/usr/bin/etl"],"resources":{"cpu":"500m"}},"overlap":"forbid","catch_up":"all","max_catch_up":10,"start_at":"2030-01-01T00:00:00Z"}`
	call(http.StatusCreated, "POST", "/v1/schedules", sch)
	call(http.StatusConflict, "POST", "/v1/schedules", sch)
	call(http.StatusCreated, "POST", "/v1/schedules", `{"name":"flow","cron":"@every 1h","workflow":{"name":"f","jobs":[{"name":"a","command":"true"}]}}`)
	call(http.StatusOK, "GET", "/v1/schedules", "")
	call(http.StatusOK, "GET", "/v1/schedules/nightly", "")
	call(http.StatusOK, "PUT", "/v1/schedules/nightly", `{"cron":"0 3 * * *","job":{"command":"true"},"paused":true}`)
	call(http.StatusOK, "POST", "/v1/schedules/nightly/resume", "")
	call(http.StatusOK, "POST", "/v1/schedules/nightly/pause", "")
	call(http.StatusCreated, "POST", "/v1/schedules/nightly/trigger", "")
	call(http.StatusCreated, "POST", "/v1/schedules/flow/trigger", "")
	call(http.StatusOK, "GET", "/v1/schedules/nightly", "")
	call(http.StatusBadRequest, "POST", "/v1/schedules", `{"name":"bad","cron":"61 * * * *","job":{"command":"true"}}`)
	call(http.StatusNoContent, "DELETE", "/v1/schedules/flow", "")
	call(http.StatusNotFound, "GET", "/v1/schedules/flow", "")

	// Nodes, queues, namespaces.
	call(http.StatusOK, "GET", "/v1/nodes", "")
	call(http.StatusOK, "GET", "/v1/nodes?role=server&state=alive&limit=1", "")
	call(http.StatusOK, "GET", "/v1/nodes/n1", "")
	call(http.StatusOK, "GET", "/v1/nodes/n1/usage", "")
	call(http.StatusOK, "POST", "/v1/nodes/w1/drain", `{"deadline":"10m"}`)
	call(http.StatusOK, "POST", "/v1/nodes/w1/eligibility", `{"eligibility":"eligible"}`)
	call(http.StatusConflict, "POST", "/v1/nodes/w1/down", "")
	a.cluster.must(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: "c9", HTTPAddr: "127.0.0.1:1", Role: fsm.RoleClient,
		Capacity: fsm.Resources{CPU: 1000, MemoryMB: 1024}, Drivers: []string{"process"}}})
	call(http.StatusOK, "POST", "/v1/nodes/c9/down", "")
	call(http.StatusNotFound, "GET", "/v1/nodes/nope", "")
	call(http.StatusOK, "PUT", "/v1/queues/etl", `{"max_running":4}`)
	call(http.StatusOK, "GET", "/v1/queues", "")
	call(http.StatusOK, "PUT", "/v1/namespaces/data", `{"max_running":4,"max_cpu":"8","max_memory":"16GiB","drivers":["process"],"allow_root":false}`)
	call(http.StatusOK, "GET", "/v1/namespaces/data", "")
	call(http.StatusOK, "GET", "/v1/namespaces", "")
	call(http.StatusNoContent, "DELETE", "/v1/namespaces/data", "")

	// Cluster, meta, and errors of the catch-all.
	call(http.StatusOK, "GET", "/v1/cluster/members", "")
	call(http.StatusOK, "GET", "/v1/cluster/raft", "")
	call(http.StatusOK, "GET", "/v1/cluster/hash", "")
	call(http.StatusOK, "GET", "/v1/health", "")
	call(http.StatusOK, "GET", "/v1/ready", "")
	call(http.StatusOK, "GET", "/v1/openapi.json", "")
	call(http.StatusOK, "GET", "/v1/metrics", "")
	call(http.StatusOK, "GET", "/v1/acl/tokens", "")
	call(http.StatusBadRequest, "POST", "/v1/acl/bootstrap", "")
	call(http.StatusNotFound, "GET", "/v1/no-such-route", "")
	call(http.StatusMethodNotAllowed, "PATCH", "/v1/jobs", "")
	call(http.StatusOK, "POST", "/v1/cluster/join", `{"addrs":["10.0.0.1:7072"]}`)
	call(http.StatusOK, "POST", "/v1/cluster/leave", "")

	c.checkEvents(base, 20)

	// The operations this test must reach; one that stops being reached
	// (a renamed route, a moved test) fails here rather than going quiet.
	for _, op := range []string{"submitJobs", "listJobs", "countJobs", "getJob", "cancelJob", "retryJob", "getJobLogs", "getJobEvents",
		"getJobResult", "listArtifacts", "getArtifact", "getJobTasks", "putCheckpoint", "getCheckpoint", "streamEvents",
		"submitWorkflow", "listWorkflows", "getWorkflow", "cancelWorkflow", "retryWorkflow",
		"createSchedule", "listSchedules", "getSchedule", "replaceSchedule", "deleteSchedule", "triggerSchedule", "pauseSchedule", "resumeSchedule",
		"listNodes", "getNode", "getNodeUsage", "drainNode", "setNodeEligibility", "markNodeDown", "listQueues", "setQueue",
		"listNamespaces", "getNamespace", "setNamespace", "deleteNamespace",
		"listMembers", "getRaft", "getStateHash", "joinCluster", "leaveCluster", "health", "ready", "getOpenAPI", "getMetrics", "listTokens", "aclBootstrap"} {
		if !c.seen[op] {
			t.Errorf("operation %s was not checked", op)
		}
	}
}

// TestOpenAPIContractACL: with ACL on, the refusals (401 without a token,
// 403 for a token of another namespace) are in the error shape too.
func TestOpenAPIContractACL(t *testing.T) {
	a, s := newACLAPI(t)
	c := newContract(t, s)
	for _, tc := range []struct {
		path, secret string
		want         int
	}{
		{"/v1/jobs", "", http.StatusUnauthorized},
		{"/v1/jobs?namespace=b", secretFor("read-a"), http.StatusForbidden},
		{"/v1/jobs?namespace=a", secretFor("read-a"), http.StatusOK},
		{"/v1/acl/token/self", secretFor("read-a"), http.StatusOK},
		{"/v1/acl/tokens", secretFor("management"), http.StatusOK},
		{"/v1/health", "", http.StatusOK},
		{OpenAPIPath, "", http.StatusOK},
	} {
		var hdr []string
		if tc.secret != "" {
			hdr = []string{"Authorization", "Bearer " + tc.secret}
		}
		if code, body := c.call(a.srv.URL, "GET", tc.path, "", hdr...); code != tc.want {
			t.Errorf("GET %s: %d %s, want %d", tc.path, code, body, tc.want)
		}
	}
	mgmt := []string{"Authorization", "Bearer " + secretFor("management")}
	code, body := c.call(a.srv.URL, "POST", "/v1/acl/tokens", `{"name":"ci","roles":[{"role":"submit","namespace":"build"}],"ttl":"720h"}`, mgmt...)
	var tok NewToken
	if err := json.Unmarshal(body, &tok); code != http.StatusCreated || err != nil {
		t.Fatalf("create token: %d %s", code, body)
	}
	if code, body := c.call(a.srv.URL, "DELETE", "/v1/acl/tokens/"+tok.AccessorID, "", mgmt...); code != http.StatusNoContent {
		t.Errorf("revoke: %d %s", code, body)
	}
	if code, body := c.call(a.srv.URL, "POST", "/v1/acl/internal-secret/rotate", "", mgmt...); code != http.StatusOK {
		t.Errorf("rotate: %d %s", code, body)
	}
	for _, op := range []string{"createToken", "revokeToken", "rotateInternalSecret", "tokenSelf"} {
		if !c.seen[op] {
			t.Errorf("operation %s was not checked", op)
		}
	}
}
