package netns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Prefix starts every interface and namespace name this package creates.
const Prefix = "fjs"

// Topology is a bridge plus N namespaces on Subnet (e.g. "10.213.7").
type Topology struct {
	Subnet string
	Bridge string
	NS     []string // namespace of node i
	IPs    []string // address of node i
	veths  []string
}

// HostIP is the bridge's address, through which the harness reaches nodes.
func (t *Topology) HostIP() string { return t.Subnet + ".254" }

func run(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Check reports what the real tier needs and the machine lacks.
func Check() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (ip netns, iptables)")
	}
	for _, b := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("needs %s in PATH (apt-get install iproute2 iptables)", b)
		}
	}
	return nil
}

// Setup creates the bridge and n namespaces. On error it removes what it
// created. subnet is the first three octets of a private /24 used only here.
func Setup(subnet string, n int) (*Topology, error) {
	t := &Topology{Subnet: subnet, Bridge: Prefix + "br0"}
	if err := t.setup(n); err != nil {
		t.Teardown()
		return nil, err
	}
	return t, nil
}

func (t *Topology) setup(n int) error {
	if err := run("ip", "link", "add", t.Bridge, "type", "bridge"); err != nil {
		return err
	}
	if err := run("ip", "addr", "add", t.HostIP()+"/24", "dev", t.Bridge); err != nil {
		return err
	}
	if err := run("ip", "link", "set", t.Bridge, "up"); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := t.AddNode(); err != nil {
			return err
		}
	}
	return nil
}

// AddNode creates one more namespace (for membership changes).
func (t *Topology) AddNode() error {
	i := len(t.NS) + 1
	ns, veth, ip := fmt.Sprintf("%sn%d", Prefix, i), fmt.Sprintf("%sv%d", Prefix, i), fmt.Sprintf("%s.%d", t.Subnet, i)
	if err := run("ip", "netns", "add", ns); err != nil {
		return err
	}
	t.NS = append(t.NS, ns)
	if err := run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
		return err
	}
	t.veths = append(t.veths, veth)
	t.IPs = append(t.IPs, ip)
	for _, c := range [][]string{
		{"ip", "link", "set", veth, "master", t.Bridge, "up"},
		{"ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
	} {
		if err := run(c...); err != nil {
			return err
		}
	}
	return nil
}

// KillAll SIGKILLs every process still inside this run's namespaces: agents,
// supervisors and orphaned jobs alike. All of them were started by this run.
func (t *Topology) KillAll() {
	for _, ns := range t.NS {
		killNS(ns)
	}
}

func killNS(ns string) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		_ = run("kill", "-9", f)
	}
}

// Teardown kills what runs inside and deletes namespaces, veths and bridge.
func (t *Topology) Teardown() {
	t.KillAll()
	for _, ns := range t.NS {
		_ = run("ip", "netns", "del", ns)
	}
	for _, v := range t.veths {
		_ = run("ip", "link", "del", v)
	}
	_ = run("ip", "link", "del", t.Bridge)
}

// Sweep removes leftovers of an earlier run: namespaces and links whose
// names start with Prefix (only this suite uses it).
func Sweep() {
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && strings.HasPrefix(f[0], Prefix) {
				killNS(f[0])
				_ = run("ip", "netns", "del", f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
			if strings.HasPrefix(name, Prefix) {
				_ = run("ip", "link", "del", name)
			}
		}
	}
}

// pingTimeout bounds Ping for the whole topology.
const pingTimeout = 30 * time.Second

// Ping checks that every pair of namespaces can talk (br_netfilter and a
// host FORWARD policy can silently break bridged traffic), polling each
// pair until pingTimeout.
func (t *Topology) Ping() error {
	deadline := time.Now().Add(pingTimeout)
	for i, ns := range t.NS {
		for j, ip := range t.IPs {
			if i == j {
				continue
			}
			// Each ping waits up to a second for its reply, so this polls
			// without spinning; a fresh veth or ARP entry can take a few
			// seconds on a loaded machine (one single-shot ping failed
			// isolate-leader-s3 at load average 200).
			for {
				err := run("ip", "netns", "exec", ns, "ping", "-c1", "-W1", ip)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s cannot reach %s within %v: %w", ns, ip, pingTimeout, err)
				}
			}
		}
	}
	return nil
}
