package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/httpapi"
)

// FuzzParseSpecFile: what `foreman submit -f FILE` reads (YAML or JSON, one
// spec or a batch) never panics, and every spec it returns either
// normalises or fails with a field error (docs/security.md, "Fuzzing").
// The file name only chooses the format (.yaml/.yml force YAML).
func FuzzParseSpecFile(f *testing.F) {
	for _, dir := range []string{"jobs", "batches", "workflows", "schedules"} {
		files, _ := filepath.Glob(filepath.Join("..", "testdata", dir, "*"))
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(filepath.Base(p), b)
		}
	}
	for _, s := range []string{``, `{}`, `[]`, `[{"command":"x"}]`, `{"jobs":[]}`, `{"jobs":null}`, `{"jobs":[null,{}]}`,
		`{"command":"x","nope":1}`, `{"jobs":[{"command":"x"}],"command":"y"}`, "command: x\nnope: 1\n", "jobs:\n  - command: x\n  - 1\n",
		"- a\n- b\n", "a: &a [*a]\n", "command: !!binary eA==\n", "resources: {cpu: .inf, memory: .nan}\ncommand: x\n", "\xff\xfe"} {
		f.Add("spec.json", []byte(s))
		f.Add("spec.yaml", []byte(s))
	}
	f.Fuzz(func(t *testing.T, name string, b []byte) {
		specs, batch, err := parseSpecFile(name, b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if !batch && len(specs) != 1 {
			t.Fatalf("a single spec gave %d specs", len(specs))
		}
		for i := range specs {
			if _, err := specs[i].Normalize(); err != nil && (!errors.Is(err, httpapi.ErrInvalid) || !strings.Contains(err.Error(), ":")) {
				t.Fatalf("spec %d: %v is not a field error", i, err)
			}
		}
	})
}
