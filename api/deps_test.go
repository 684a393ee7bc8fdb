package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// heavyDeps must stay out of api's dependencies: a program that submits
// jobs should not compile the server (raft, bbolt, runc, gossip, metrics).
var heavyDeps = []string{
	"github.com/hashicorp/raft",
	"go.etcd.io/bbolt",
	"github.com/opencontainers/",
	"github.com/hashicorp/memberlist",
	"github.com/prometheus/client_golang",
}

func TestNoServerDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, ban := range heavyDeps {
			if strings.HasPrefix(p, ban) {
				t.Errorf("api depends on %s: it must be importable without the server", p)
			}
		}
		if strings.HasPrefix(p, "github.com/foreman-sched/foreman/") && p != "github.com/foreman-sched/foreman/api" {
			t.Errorf("api depends on %s: it imports no project package", p)
		}
	}
}
