package httpapi

import (
	"context"
	"io"
	"net/http"
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
