package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// System tests run the real binary as separate agent processes on loopback.

const systemTimeout = 60 * time.Second

// foremanBin returns the binary under test: $FOREMAN_BIN (make test sets it)
// or a fresh build into a temp dir.
func foremanBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("FOREMAN_BIN"); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), "foreman")
	cmd := exec.Command("go", "build", "-tags", "netgo osusergo", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build foreman: %v\n%s", err, b)
	}
	return out
}

// freeBase finds a base port whose three consecutive ports are free.
func freeBase(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base > 65000 {
			continue
		}
		ok := true
		for p := base; p < base+3; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			l.Close()
			u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			u.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

type agentProc struct {
	name, dir string
	base      int
	cmd       *exec.Cmd
}

func (a *agentProc) url(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", a.base, path)
}

func startAgent(t *testing.T, bin, name, dir string, base int, extra ...string) *agentProc {
	t.Helper()
	args := append([]string{"agent", "--name", name, "--data-dir", dir, "--bind", "127.0.0.1",
		"--port", fmt.Sprint(base)}, extra...)
	cmd := exec.Command(bin, args...)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(dir), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agentProc{name: name, dir: dir, base: base, cmd: cmd}
	t.Cleanup(func() {
		if a.cmd.ProcessState == nil {
			_ = a.cmd.Process.Kill()
			_ = a.cmd.Wait()
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("--- %s log ---\n%s", name, tail(string(b), 4000))
		}
	})
	return a
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func getJSON(url string, v any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

func postJSON(url string, body any, v any) error {
	b, _ := json.Marshal(body)
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, rb)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(rb, v)
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronisation
	}
	t.Fatalf("%s: not true after %s: %v", what, d, err)
}

type raftView struct {
	Leader  string `json:"leader"`
	Servers []struct {
		ID       string `json:"id"`
		Role     string `json:"role"`
		Suffrage string `json:"suffrage"`
	} `json:"servers"`
}

func leaderOf(a *agentProc) (string, error) {
	var rv raftView
	if err := getJSON(a.url("/v1/cluster/raft"), &rv); err != nil {
		return "", err
	}
	if rv.Leader == "" {
		return "", fmt.Errorf("%s sees no leader", a.name)
	}
	return rv.Leader, nil
}

func TestSystemThreeAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	bin := foremanBin(t)
	root := t.TempDir()
	var agents []*agentProc
	first := freeBase(t)
	for i := 1; i <= 3; i++ {
		base := first
		if i > 1 {
			base = freeBase(t)
		}
		extra := []string{"--bootstrap-expect", "3"}
		if i > 1 {
			extra = append(extra, "--join", fmt.Sprintf("127.0.0.1:%d", first))
		}
		agents = append(agents, startAgent(t, bin, fmt.Sprintf("sys%d", i), filepath.Join(root, fmt.Sprintf("sys%d", i), "data"), base, extra...))
	}

	// One leader, two followers, seen the same from every agent.
	eventually(t, systemTimeout, "one leader and two followers", func() error {
		var rv raftView
		if err := getJSON(agents[0].url("/v1/cluster/raft"), &rv); err != nil {
			return err
		}
		roles := map[string]int{}
		for _, s := range rv.Servers {
			roles[s.Role]++
		}
		if roles["leader"] != 1 || roles["follower"] != 2 {
			return fmt.Errorf("roles %v", roles)
		}
		for _, a := range agents[1:] {
			l, err := leaderOf(a)
			if err != nil {
				return err
			}
			if l != rv.Leader {
				return fmt.Errorf("%s thinks the leader is %s, %s thinks %s", a.name, l, agents[0].name, rv.Leader)
			}
		}
		return nil
	})

	leaderName, _ := leaderOf(agents[0])
	var follower, leader *agentProc
	for _, a := range agents {
		if a.name == leaderName {
			leader = a
		} else if follower == nil {
			follower = a
		}
	}

	// A submit through a follower is forwarded, and the job runs to success.
	var sub struct {
		ID string `json:"id"`
	}
	if err := postJSON(follower.url("/v1/jobs"), map[string]any{
		"name": "sys", "command": []string{"sh", "-c", "echo system-test"}, "driver": "process",
	}, &sub); err != nil {
		t.Fatal(err)
	}
	if sub.ID == "" {
		t.Fatal("submit returned no job ID")
	}
	waitJobState(t, follower, sub.ID, "succeeded")

	// Kill -9 the leader: a new one is elected and submits keep working.
	_ = syscall.Kill(-leader.cmd.Process.Pid, syscall.SIGKILL)
	_ = leader.cmd.Wait()
	eventually(t, systemTimeout, "a new leader", func() error {
		l, err := leaderOf(follower)
		if err != nil {
			return err
		}
		if l == leader.name {
			return fmt.Errorf("still sees the dead leader %s", l)
		}
		return nil
	})
	var sub2 struct {
		ID string `json:"id"`
	}
	eventually(t, systemTimeout, "submit after failover", func() error {
		return postJSON(follower.url("/v1/jobs"), map[string]any{"command": "true", "driver": "process"}, &sub2)
	})
	// The first job is still there (acknowledged, not lost).
	var got struct {
		Job struct {
			State string `json:"state"`
		} `json:"job"`
	}
	if err := getJSON(follower.url("/v1/jobs/"+sub.ID), &got); err != nil {
		t.Fatal(err)
	}
	if got.Job.State != "succeeded" {
		t.Fatalf("job %s after failover: state %q, want succeeded", sub.ID, got.Job.State)
	}
}

func waitJobState(t *testing.T, a *agentProc, id, want string) {
	t.Helper()
	eventually(t, systemTimeout, "job "+id+" "+want, func() error {
		var got struct {
			Job struct {
				State  string `json:"state"`
				Reason string `json:"reason"`
			} `json:"job"`
		}
		if err := getJSON(a.url("/v1/jobs/"+id), &got); err != nil {
			return err
		}
		if got.Job.State != want {
			if strings.Contains("failed cancelled", got.Job.State) && got.Job.State != "" {
				t.Fatalf("job %s ended %s (%s), want %s", id, got.Job.State, got.Job.Reason, want)
			}
			return fmt.Errorf("state %s", got.Job.State)
		}
		return nil
	})
}
