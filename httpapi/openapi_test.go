package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// loadOpenAPI loads and validates the description as served (its
// examples included: kin-openapi checks each against its schema).
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("loading the description: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the description does not validate: %v", err)
	}
	return doc
}

// TestOpenAPIServed: GET /v1/openapi.json answers without a token, with
// ACL on, the description every agent embeds; it validates.
func TestOpenAPIServed(t *testing.T) {
	a, _ := newACLAPI(t)
	resp, err := http.Get(a.srv.URL + OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s without a token: %d %s %.200s", OpenAPIPath, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	doc, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served description does not validate: %v", err)
	}
	if doc.OpenAPI != "3.0.3" || doc.Info.Version != "v1" {
		t.Errorf("openapi %q, version %q", doc.OpenAPI, doc.Info.Version)
	}
}

// openAPIPath turns a ServeMux pattern's path into the description's:
// {path...} (the rest of the path, slashes included) is {path} there.
func openAPIPath(path string) string { return strings.ReplaceAll(path, "...}", "}") }

// TestOpenAPIRoutes: the description names exactly the routes the API
// registers, each with the permission its ACL route table entry gives.
// Left out on purpose: the node-to-node routes under /v1/internal/ (no
// contract for clients) and the catch-all "/" (404/405 answers).
func TestOpenAPIRoutes(t *testing.T) {
	_, s := newACLAPI(t)
	doc := loadOpenAPI(t)

	served := map[string]string{} // "METHOD /path" of the description → mux pattern
	for _, p := range s.acl.Patterns() {
		method, path, ok := strings.Cut(p, " ")
		switch {
		case p == "/" || strings.HasPrefix(path, "/v1/internal/"):
			continue
		case !ok:
			t.Errorf("route %q has no method: give it one, so the description can name it", p)
			continue
		}
		served[method+" "+openAPIPath(path)] = p
	}
	described := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			described[method+" "+path] = op
		}
	}
	for _, k := range sortedKeys(served) {
		if described[k] == nil {
			t.Errorf("the server serves %s (pattern %q) but httpapi/openapi.yaml does not describe it", k, served[k])
		}
	}
	for _, k := range sortedKeys(described) {
		op := described[k]
		pattern, ok := served[k]
		if !ok {
			t.Errorf("httpapi/openapi.yaml describes %s but the server has no such route", k)
			continue
		}
		perm, _ := op.Extensions["x-foreman-permission"].(string)
		if want := Routes[pattern].Perm; Permission(perm) != want {
			t.Errorf("%s: x-foreman-permission %q, the route table says %q", k, perm, want)
		}
		// Open operations say so to generators: no security requirement.
		open := op.Security != nil && len(*op.Security) == 0
		if open != (Routes[pattern].Perm == PermOpen) {
			t.Errorf("%s: security %v for a route whose permission is %q (open routes: security: [])", k, op.Security, Routes[pattern].Perm)
		}
		if op.OperationID == "" {
			t.Errorf("%s: no operationId (generated clients name their methods by it)", k)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// docExamples names the schema of each fenced example in docs/api.md, by
// the heading it stands under and its position there (0, 1, ...).
// "events" is an event stream: each data: line is an Event. A block not
// listed fails the test if it parses; one that does not parse counts as
// elided ("…") and is skipped.
var docExamples = map[string]string{
	"### `POST /v1/jobs` — submit/0":                        "JobSpecInput",
	"### HTTP jobs (`driver: http`)/0":                      "JobSpecInput",
	"### Webhooks (`notify`)/0":                             "JobSpecInput", // a "notify" fragment, read inside {}
	"### Webhooks (`notify`)/1":                             "WebhookEvent",
	"### Host volumes (`volumes`)/0":                        "JobSpecInput",
	"### `GET /v1/jobs/counts` — jobs per state/0":          "JobCounts",
	"### `GET /v1/jobs/{id}/artifacts` — list/0":            "ArtifactList",
	"### `GET /v1/jobs/{id}/artifacts/{path}` — download/0": "JobSpecInput",  // the "after" example of Dependencies, below it
	"### `POST /v1/workflows` — submit/0":                   "WorkflowInput", // YAML
	"## Schedules/0":                                        "ScheduleInput",
	"### `GET /v1/events` — Server-Sent Events/0":           "events",
	"### `GET /v1/events` — Server-Sent Events/1":           "events",
	"### `POST /v1/acl/bootstrap`/0":                        "NewToken",
	"### Backup file format/0":                              "", // a binary layout, not JSON
	"## Usage/0":                                            "UsageReport",
}

// TestOpenAPIDocExamples validates docs/api.md's examples against the
// description's schemas, so the prose and the contract cannot drift apart.
func TestOpenAPIDocExamples(t *testing.T) {
	doc := loadOpenAPI(t)
	b, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	checked := 0
	heading, n := "", 0
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "#") {
			heading, n = line, 0
			continue
		}
		lang, ok := strings.CutPrefix(strings.TrimSpace(line), "```")
		if !ok {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
		}
		block := strings.Join(lines[start:i], "\n")
		key := fmt.Sprintf("%s/%d", heading, n)
		n++
		schema, listed := docExamples[key]
		used[key] = listed
		var v any
		switch {
		case listed && schema == "":
			continue
		case schema == "events":
			for _, l := range strings.Split(block, "\n") {
				if data, ok := strings.CutPrefix(l, "data: "); ok {
					checkExample(t, doc, "docs/api.md "+key, "Event", []byte(data))
					checked++
				}
			}
			continue
		case lang == "yaml":
			j, err := YAMLToJSON([]byte(block))
			if err != nil {
				t.Errorf("docs/api.md %s: %v", key, err)
				continue
			}
			block = string(j)
		case strings.HasPrefix(strings.TrimSpace(block), `"`):
			block = "{" + block + "}" // a fragment of an object
		}
		if json.Unmarshal([]byte(block), &v) != nil {
			continue // elided with "…"
		}
		if !listed {
			t.Errorf("docs/api.md %s (line %d) is a JSON example docExamples does not name a schema for: add it", key, start)
			continue
		}
		checkExample(t, doc, "docs/api.md "+key, schema, []byte(block))
		checked++
	}
	for key := range docExamples {
		if !used[key] {
			t.Errorf("docExamples names %q, which docs/api.md no longer has", key)
		}
	}
	if checked < 10 {
		t.Errorf("only %d examples checked", checked)
	}
}

// testdataSchemas names the schema of the example specs under testdata/.
var testdataSchemas = map[string]string{
	"jobs":          "JobSpecInput",
	"http-job.yaml": "JobSpecInput",
	"batches":       "BatchSubmitRequest",
	"workflows":     "WorkflowInput",
	"schedules":     "ScheduleInput",
	"gpu":           "", // GPU host fixtures for exec/gpu, not specs
	"prevbuild":     "", // the previous build's data dir for the compat systest, not specs
}

// TestOpenAPITestdata validates the example specs under testdata/ (YAML
// as the CLI sends it: converted to JSON) against the request schemas.
func TestOpenAPITestdata(t *testing.T) {
	doc := loadOpenAPI(t)
	root := filepath.Join("..", "testdata")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		schema, ok := testdataSchemas[strings.Split(filepath.ToSlash(rel), "/")[0]]
		if !ok {
			t.Errorf("testdata/%s: testdataSchemas names no schema for it", rel)
			return nil
		}
		if schema == "" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if j, err := YAMLToJSON(b); err != nil { // JSON is YAML too
			t.Errorf("testdata/%s: %v", rel, err)
		} else {
			checkExample(t, doc, "testdata/"+rel, schema, j)
			checked++
		}
		return nil
	})
	if err != nil || checked == 0 {
		t.Fatalf("testdata: %d files checked, %v", checked, err)
	}
}

// checkExample validates a JSON document against a component schema.
func checkExample(t *testing.T, doc *openapi3.T, where, schema string, b []byte) {
	t.Helper()
	ref := doc.Components.Schemas[schema]
	if ref == nil {
		t.Fatalf("%s: no schema %q in the description", where, schema)
	}
	var v any
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&v); err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.SetSchemaErrorMessageCustomizer(shortSchemaError)); err != nil {
		t.Errorf("%s is not a valid %s: %v", where, schema, err)
	}
}
