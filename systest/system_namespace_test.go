package systest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemNamespaceQuota runs the README's namespace commands on real
// agents: a quota of two running jobs holds the rest queued with the reason
// in `job status` and is never exceeded; the policy refuses a driver and
// root at submit; a job naming a user lands only on a node whose
// --job-users allow it.
func TestSystemNamespaceQuota(t *testing.T) {
	c := newSysCluster(t, 2)
	// Jobs below name a user: like /var/lib, the data dirs' parents must be
	// searchable (MkdirTemp makes 0700; see TestSystemJobIsolation).
	if err := os.Chmod(c.root, 0o711); err != nil {
		t.Fatal(err)
	}
	lead := c.leader()
	addr := strings.TrimSuffix(lead.url(""), "/")
	cli := func(args ...string) cliResult {
		t.Helper()
		return runForeman(t, c.bin, addr, args...)
	}
	// The README's commands, as written.
	r := cli("namespace", "set", "build", "--max-running", "2", "--max-cpu", "4", "--max-memory", "8GiB", "--drivers", "process,container")
	if r.code != 0 || !strings.Contains(r.stdout, "namespace build: max_running 2, max_cpu 4, max_memory 8GiB, drivers process,container, allow_root no") {
		t.Fatalf("namespace set: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Flags not given keep their value.
	if r := cli("namespace", "set", "build", "--max-memory", "0"); r.code != 0 || !strings.Contains(r.stdout, "max_running 2, max_cpu 4, max_memory unlimited") {
		t.Fatalf("namespace set (merge): exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	d := newJobDir(t, c.root)
	var ids []string
	for i := range 4 {
		spec := d.waitingJob(fmt.Sprintf("q%d", i))
		spec["namespace"] = "build"
		spec["resources"] = map[string]any{"cpu": "100m", "memory": 64}
		ids = append(ids, submitJob(t, lead, spec))
	}
	states := func() (running, queued []string, reasons map[string]string) {
		reasons = map[string]string{}
		for _, id := range ids {
			j, err := getJob(lead, id)
			if err != nil {
				t.Fatalf("job %s: %v", id, err)
			}
			switch j.Job.State {
			case "running":
				running = append(running, id)
			case "queued":
				queued = append(queued, id)
				reasons[id] = j.Job.Reason
			}
		}
		return
	}
	var held string
	eventually(t, systemTimeout, "two running, two queued for the quota", func() error {
		running, queued, reasons := states()
		if len(running) > 2 {
			t.Fatalf("%d jobs of namespace build running, quota 2: %v", len(running), running)
		}
		if len(running) != 2 || len(queued) != 2 {
			return fmt.Errorf("running %v, queued %v", running, queued)
		}
		// The scheduler writes the reason of the first job of a blocked
		// placement group only (sched/DESIGN.md); the rest wait behind it.
		for _, id := range queued {
			if reasons[id] == "namespace build at max_running 2" {
				held = id
				return nil
			}
		}
		return fmt.Errorf("no queued job has the quota reason: %v", reasons)
	})
	if r := cli("job", "status", held); r.code != 0 || !strings.Contains(r.stdout, "namespace build at max_running 2") {
		t.Fatalf("job status %s: exit %d, stdout %q, stderr %q; want the quota reason", held, r.code, r.stdout, r.stderr)
	}
	r = cli("namespace", "status", "build", "--json")
	var st struct {
		MaxRunning int `json:"max_running"`
		Usage      struct {
			Running int            `json:"running"`
			CPU     int64          `json:"cpu"`
			Jobs    map[string]int `json:"jobs"`
		} `json:"usage"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st.MaxRunning != 2 || st.Usage.Running != 2 || st.Usage.CPU != 200 || st.Usage.Jobs["queued"] != 2 {
		t.Fatalf("namespace status --json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := cli("namespace", "status", "build"); r.code != 0 || !strings.Contains(r.stdout, "running:     2/2") {
		t.Fatalf("namespace status: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := cli("namespace", "ls"); r.code != 0 || !strings.Contains(r.stdout, "build") || !strings.Contains(r.stdout, "process,container") {
		t.Fatalf("namespace ls: exit %d, stdout %q", r.code, r.stdout)
	}
	// Releasing the first two lets the other two run; the quota still holds.
	d.release(t)
	for _, id := range ids {
		waitJobState(t, lead, id, "succeeded")
	}

	// Policy: a driver the namespace does not list, and root without allow_root.
	if r := cli("submit", "--namespace", "build", "--driver", "http", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "driver") {
		t.Fatalf("submit with a driver outside the policy: exit %d, stdout %q, stderr %q; want a refusal naming driver", r.code, r.stdout, r.stderr)
	}
	if r := cli("submit", "--namespace", "build", "--driver", "process", "--user", "root", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "user") || !strings.Contains(r.stderr, "allow_root") {
		t.Fatalf("submit as root: exit %d, stdout %q, stderr %q; want a refusal naming user and allow_root", r.code, r.stdout, r.stderr)
	}
	if r := cli("namespace", "set", "build", "--allow-root"); r.code != 0 || !strings.Contains(r.stdout, "allow_root yes") {
		t.Fatalf("namespace set --allow-root: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := cli("run", "--namespace", "build", "--driver", "process", "--user", "root", "--", "id", "-u"); r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Fatalf("run as root with allow_root: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// A node that allows only nobody: a job naming root stays queued there
	// with the reason, one naming nobody runs.
	ip := c.agents[0].ip[:strings.LastIndex(c.agents[0].ip, ".")] + ".3"
	dir := filepath.Join(c.root, "n3", "data")
	n3 := &agentProc{name: "n3", dir: dir, ip: ip, base: lead.base, bin: c.bin, logPath: filepath.Join(c.root, "n3", "n3.log"),
		args: []string{"agent", "--name", "n3", "--data-dir", dir, "--bind", ip, "--port", fmt.Sprint(lead.base),
			"--job-users", "nobody", "--job-default-user", "nobody", "--label", "sysnode=n3", "--default-driver", "process",
			"--join", net.JoinHostPort(c.agents[0].ip, fmt.Sprint(c.agents[0].base))}}
	n3.start(t)
	t.Cleanup(n3.stop9)
	eventually(t, systemTimeout, "n3 registered with its --job-users", func() error {
		var nd struct {
			Gossip   string   `json:"gossip"`
			JobUsers []string `json:"job_users"`
		}
		if err := getJSON(lead.url("/v1/nodes/n3"), &nd); err != nil {
			return err
		}
		if nd.Gossip != "alive" || strings.Join(nd.JobUsers, ",") != "nobody" {
			return fmt.Errorf("n3: %+v", nd)
		}
		return nil
	})
	rootJob := submitJob(t, lead, map[string]any{"command": []string{"true"}, "namespace": "build", "driver": "process",
		"user": "root", "constraints": []string{"sysnode == n3"}})
	nobodyJob := submitJob(t, lead, map[string]any{"command": []string{"true"}, "namespace": "build", "driver": "process",
		"user": "nobody", "constraints": []string{"sysnode == n3"}})
	waitJobState(t, lead, nobodyJob, "succeeded")
	eventually(t, systemTimeout, "the root job held by n3's --job-users", func() error {
		j, err := getJob(lead, rootJob)
		if err != nil {
			return err
		}
		if j.Job.State != "queued" || !strings.Contains(j.Job.Reason, "user root not in --job-users") {
			return fmt.Errorf("%s", j)
		}
		return nil
	})
	if r := cli("namespace", "delete", "build"); r.code != 0 {
		t.Fatalf("namespace delete: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := cli("namespace", "delete", "build"); r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("namespace delete again: exit %d, stderr %q; want one line and a non-zero exit", r.code, r.stderr)
	}
}
