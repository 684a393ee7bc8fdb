package httpapi

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// previousRelease names the release whose API this build must keep
// (docs/operations.md, "Compatibility"): its source is the upgrade test's
// (testdata/prevbuild), so the description compared is the one it served.
const (
	previousRelease       = "v0.1.0"
	previousReleaseSource = "../testdata/prevbuild/v0.1.0-src.tar.gz"
)

// previousOpenAPI reads the previous release's openapi.yaml from its source.
func previousOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	f, err := os.Open(previousReleaseSource)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s: no httpapi/openapi.yaml", previousReleaseSource)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "foreman-"+previousRelease+"/httpapi/openapi.yaml" {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := openapi3.NewLoader().LoadFromData(b)
		if err != nil {
			t.Fatalf("the %s description: %v", previousRelease, err)
		}
		return doc
	}
}

// TestOpenAPIKeepsPreviousRelease fails on a breaking change of /v1 since
// the previous release: what the compatibility policy promises a client
// written against it.
func TestOpenAPIKeepsPreviousRelease(t *testing.T) {
	for _, b := range breakingChanges(previousOpenAPI(t), loadOpenAPI(t)) {
		t.Errorf("breaking change since %s: %s", previousRelease, b)
	}
}

// The checker finds each kind of break it knows (and so can fail).
func TestOpenAPIBreakingChangesFound(t *testing.T) {
	load := func(y string) *openapi3.T {
		doc, err := openapi3.NewLoader().LoadFromData([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	const head = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\n"
	old := load(head + `paths:
  /v1/a:
    get:
      parameters: [{name: q, in: query, schema: {type: string}}]
      responses: {'200': {description: ok}}
    post: {responses: {'200': {description: ok}}}
components:
  schemas:
    S:
      type: object
      required: [x]
      properties:
        x: {type: string}
        y: {type: integer}
        z: {type: string, enum: [a, b]}
`)
	same := breakingChanges(old, old)
	if len(same) != 0 {
		t.Fatalf("the same description: %v", same)
	}
	changed := load(head + `paths:
  /v1/a:
    get:
      parameters: [{name: q, in: query, required: true, schema: {type: string}}, {name: r, in: query, required: true, schema: {type: string}}]
      responses: {'202': {description: ok}}
components:
  schemas:
    S:
      type: object
      required: [x, y]
      properties:
        x: {type: integer}
        z: {type: string, enum: [a]}
`)
	got := breakingChanges(old, changed)
	want := []string{
		"POST /v1/a: removed",
		"GET /v1/a: parameter query q: now required",
		"GET /v1/a: parameter query r: new and required",
		"GET /v1/a: response 200: removed",
		"schema S: property y: removed",
		"schema S: property x: type string became integer",
		"schema S: property z: enum value \"b\" removed",
		"schema S: property y: now required",
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("found:\n%q\nwant:\n%q", got, want)
	}
}

// breakingChanges lists what a client of old would find broken in cur:
// an operation, a success response, a schema or a property removed, a
// property's type changed, an enum value removed, a property or a
// parameter newly required. Additions are not breaks.
func breakingChanges(old, cur *openapi3.T) []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	for path, op := range old.Paths.Map() {
		curItem := cur.Paths.Value(path)
		for method, o := range op.Operations() {
			var c *openapi3.Operation
			if curItem != nil {
				c = curItem.GetOperation(method)
			}
			where := method + " " + path
			if c == nil {
				add("%s: removed", where)
				continue
			}
			for _, p := range c.Parameters {
				if p.Value == nil || !p.Value.Required {
					continue
				}
				if was := o.Parameters.GetByInAndName(p.Value.In, p.Value.Name); was == nil {
					add("%s: parameter %s %s: new and required", where, p.Value.In, p.Value.Name)
				} else if !was.Required {
					add("%s: parameter %s %s: now required", where, p.Value.In, p.Value.Name)
				}
			}
			if o.Responses == nil {
				continue
			}
			for code := range o.Responses.Map() {
				if len(code) == 3 && code[0] == '2' && (c.Responses == nil || c.Responses.Value(code) == nil) {
					add("%s: response %s: removed", where, code)
				}
			}
		}
	}
	for name, ref := range old.Components.Schemas {
		curRef := cur.Components.Schemas[name]
		if curRef == nil || curRef.Value == nil {
			add("schema %s: removed", name)
			continue
		}
		was, now := ref.Value, curRef.Value
		for prop, p := range was.Properties {
			np := now.Properties[prop]
			if np == nil || np.Value == nil {
				add("schema %s: property %s: removed", name, prop)
				continue
			}
			if p.Value == nil {
				continue
			}
			if p.Value.Type != nil && np.Value.Type != nil && !slices.Equal(p.Value.Type.Slice(), np.Value.Type.Slice()) {
				add("schema %s: property %s: type %v became %v", name, prop, typeName(p.Value.Type), typeName(np.Value.Type))
			}
			if len(np.Value.Enum) > 0 {
				for _, e := range p.Value.Enum {
					if !slices.Contains(np.Value.Enum, e) {
						add("schema %s: property %s: enum value %q removed", name, prop, fmt.Sprint(e))
					}
				}
			}
		}
		for _, r := range now.Required {
			if !slices.Contains(was.Required, r) {
				add("schema %s: property %s: now required", name, r)
			}
		}
	}
	return out
}

func typeName(t *openapi3.Types) string {
	s := t.Slice()
	if len(s) == 1 {
		return s[0]
	}
	return fmt.Sprint(s)
}
