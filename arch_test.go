package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/foreman-sched/foreman"

// allowedImports is the package direction of DESIGN.md: fsm at the bottom,
// cli (the command line and the agent's wiring) and main at the top. Keys
// are top-level directories; values are the top-level project packages each
// may import (its own subpackages are always allowed). No key lists cli, so
// nothing below it may import it.
var allowedImports = map[string][]string{
	"api":         {}, // the public Go client: importable without the server
	"wallclock":   {},
	"certs":       {},
	"groupcommit": {}, // the group-commit queue of submits (httpapi) and clients' reports (cluster)
	"objstore":    {}, // the S3 client (issue 25): exec and httpapi declare what they use of it; cli/agent wires it
	"fsm":         {},
	"release":     {}, // make release: drives the go toolchain, imports no foreman package
	"cluster":     {"fsm", "wallclock", "certs", "groupcommit"},
	"sched":       {"fsm", "wallclock"},
	"exec":        {"fsm"},
	"httpapi":     {"api", "fsm", "wallclock", "certs", "groupcommit"},
	"ui":          {},
	"jepsen":      {"api", "fsm", "httpapi", "cluster", "wallclock", "certs", "objstore"}, // objstore/objstoretest: the store nemesis's weed
	"cli":         {"api", "fsm", "cluster", "sched", "exec", "httpapi", "ui", "wallclock", "certs", "objstore", "groupcommit"},
	"systest":     {"api", "fsm", "cluster", "sched", "exec", "httpapi", "ui", "wallclock", "certs", "cli", "objstore", "groupcommit"},
}

// externalBans keeps heavy or wrong-layer libraries out of low packages.
var externalBans = map[string][]string{
	"api":     {"github.com/hashicorp/", "go.etcd.io/bbolt", "github.com/opencontainers/", "github.com/prometheus/"},
	"fsm":     {"github.com/hashicorp/memberlist", "github.com/opencontainers/", "net/http", "github.com/minio/"},
	"sched":   {"github.com/hashicorp/raft", "go.etcd.io/bbolt", "github.com/opencontainers/"},
	"httpapi": {"github.com/hashicorp/raft", "go.etcd.io/bbolt", "github.com/opencontainers/", "github.com/minio/"},
	"exec":    {"github.com/minio/"},
}

func TestPackageDirection(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		top := strings.SplitN(filepath.ToSlash(path), "/", 2)[0]
		if !strings.Contains(filepath.ToSlash(path), "/") {
			return nil // package main may import everything
		}
		allowed, ok := allowedImports[top]
		if !ok {
			t.Errorf("%s: top-level package %q is not in the layout; add it to DESIGN.md/docs/architecture.md and this test", path, top)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module+"/") {
				dep := strings.SplitN(strings.TrimPrefix(p, module+"/"), "/", 2)[0]
				if dep != top && !contains(allowed, dep) {
					t.Errorf("%s imports %s: %s may import only %v", path, p, top, allowed)
				}
				continue
			}
			if p == module {
				t.Errorf("%s imports package main", path)
			}
			for _, ban := range externalBans[top] {
				if strings.HasPrefix(p, ban) && !strings.HasSuffix(path, "_test.go") {
					t.Errorf("%s imports %s, which does not belong in %s", path, p, top)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no package files checked")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
