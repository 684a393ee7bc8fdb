package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The example specs under testdata/jobs and testdata/batches (shown by the
// README and docs) go through the decoder `foreman submit -f` uses and the
// server's validation, so an example that stops being valid fails here.
func TestTestdataSpecs(t *testing.T) {
	for dir, wantBatch := range map[string]bool{"../testdata/jobs": false, "../testdata/batches": true} {
		files, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no examples (%v)", dir, err)
		}
		for _, f := range files {
			specs, batch, err := readSpecFile(f)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			if batch != wantBatch {
				t.Errorf("%s: batch=%v, want %v (jobs/ holds single specs, batches/ {\"jobs\": [...]})", f, batch, wantBatch)
			}
			for i := range specs {
				if _, err := specs[i].Normalize(); err != nil {
					t.Errorf("%s: spec %d: %v", f, i, err)
				}
			}
		}
	}
}

// Every testdata/ path the README and docs name exists, and docs/api.md's
// submit example is testdata/jobs/nightly-report.json.
func TestTestdataNamedByDocs(t *testing.T) {
	docs, _ := filepath.Glob("../docs/*.md")
	docs = append(docs, "../README.md")
	ref := regexp.MustCompile("testdata/[A-Za-z0-9_./-]+\\.(?:ya?ml|json)")
	named := 0
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ref.FindAllString(string(b), -1) {
			named++
			if _, err := os.Stat(filepath.Join("..", p)); err != nil {
				t.Errorf("%s names %s: %v", d, p, err)
			}
		}
	}
	if named == 0 {
		t.Error("no doc names a testdata/ example")
	}

	api, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(api)
	i := strings.Index(s, "### `POST /v1/jobs`")
	j := strings.Index(s[i:], "```json\n")
	if i < 0 || j < 0 {
		t.Fatal("docs/api.md: no JSON example under POST /v1/jobs")
	}
	block := s[i+j+len("```json\n"):]
	block = block[:strings.Index(block, "```")]
	file, err := os.ReadFile("../testdata/jobs/nightly-report.json")
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal([]byte(block), &a); err != nil {
		t.Fatalf("docs/api.md example: %v", err)
	}
	if err := json.Unmarshal(file, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("docs/api.md's submit example differs from testdata/jobs/nightly-report.json: change both")
	}
}
