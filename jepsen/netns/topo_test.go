package netns

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTopology builds three namespaces, checks a grudge cuts traffic both
// ways and that heal and teardown leave nothing behind.
func TestTopology(t *testing.T) {
	if err := Check(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("netns tier cannot run: %v", err)
		}
		t.Skipf("SKIPPING netns test: %v", err)
	}
	unlock, err := Lock(20 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	Sweep()
	topo, err := Setup("10.213.8", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(topo.Teardown)
	if err := topo.Ping(); err != nil {
		t.Fatal(err)
	}
	if err := topo.Apply(Grudge{0: {1}, 1: {0}}); err != nil {
		t.Fatal(err)
	}
	if err := run("ip", "netns", "exec", topo.NS[0], "ping", "-c1", "-W1", topo.IPs[1]); err == nil {
		t.Fatal("n1 still reaches n2 under the grudge")
	}
	if err := run("ip", "netns", "exec", topo.NS[0], "ping", "-c1", "-W1", topo.IPs[2]); err != nil {
		t.Fatalf("n1 should reach n3: %v", err)
	}
	if err := topo.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := topo.Ping(); err != nil {
		t.Fatal(err)
	}
	topo.Teardown()
	out, _ := exec.Command("ip", "netns", "list").Output()
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	if strings.Contains(string(out), Prefix) || strings.Contains(string(links), Prefix) {
		t.Fatalf("leftovers:\n%s\n%s", out, links)
	}
}
