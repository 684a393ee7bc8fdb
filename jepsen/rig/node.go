package rig

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Port is the agents' HTTP port; raft and gossip use the next two.
const Port = 7070

// Node is one agent process in its namespace. Signals go to its PID only:
// every node runs the same binary, so a name-based kill would hit them all.
type Node struct {
	Index   int
	Name    string
	NS      string
	IP      string
	DataDir string
	LogPath string
	// ClockFile controls the agent's wall-clock offset (a binary built
	// with -tags jepsenclock; see wallclock/now_jepsenclock.go).
	ClockFile string
	// Scheme is "http", or "https" on a cluster with TLS (EnableTLS).
	Scheme string
	// Env is added to the agent's environment (the gossip key).
	Env []string
	// Client: the agent runs with --role client (outside raft: no API,
	// no state hash); Cluster.MarkClients sets it.
	Client bool
	// HostSys starts the agent with nsenter --net instead of ip netns
	// exec, which also unshares the mount namespace and mounts a fresh
	// /sys: that hides /sys/fs/cgroup, and with it the devices controller a
	// GPU host's process jobs need (Cluster.GPUs sets it).
	HostSys bool

	mu     sync.Mutex
	flags  []string // of the first start, reused on restart
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
	clock  uint64 // sequence number of the last offset written
}

// URL is the node's HTTP base address.
func (n *Node) URL() string {
	scheme := n.Scheme
	if scheme == "" {
		scheme = "http"
	}
	return fmt.Sprintf("%s://%s:%d", scheme, n.IP, Port)
}

// Start launches the agent with extra flags (join, bootstrap-expect...).
func (n *Node) Start(bin string, flags []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !exited(n.done) {
		return fmt.Errorf("%s already running", n.Name)
	}
	if err := os.MkdirAll(filepath.Dir(n.LogPath), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(n.ClockFile), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "\n=== jepsen: start %s at %s ===\n", n.Name, time.Now().Format(time.RFC3339Nano))
	enter := []string{"ip", "netns", "exec", n.NS}
	if n.HostSys {
		enter = []string{"nsenter", "--net=/run/netns/" + n.NS, "--"}
	}
	args := append([]string{bin, "agent",
		"--data-dir", n.DataDir, "--name", n.Name, "--bind", n.IP, "--port", fmt.Sprint(Port),
		"--label", "jepsen_node=" + n.Name,
		// The probe appends to files in the harness's root-owned dir: jobs
		// run as the agent's user, not the default unprivileged one.
		"--job-users", "*", "--job-default-user="}, flags...)
	args = append(enter[1:], args...)
	cmd := exec.Command(enter[0], args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(append(os.Environ(), ClockEnv+"="+n.ClockFile), n.Env...)
	// Own process group so cleanup can reach children that stayed in it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.cmd, n.done, n.paused, n.flags = cmd, done, false, flags
	return nil
}

func exited(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Flags returns the flags of the last start.
func (n *Node) Flags() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.flags
}

// Running reports whether the agent process is alive (paused counts).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !exited(n.done)
}

// PID of the agent (ip netns exec execs into it), 0 when not running.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || exited(n.done) {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *Node) signal(sig syscall.Signal) error {
	pid := n.PID()
	if pid == 0 {
		return fmt.Errorf("%s not running", n.Name)
	}
	return syscall.Kill(pid, sig)
}

// Kill9 crashes the agent and waits for it to exit. Its job processes are
// left alone: surviving a dead agent is what the supervisor must handle.
func (n *Node) Kill9() error {
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return n.wait(10 * time.Second)
}

// Stop asks the agent to shut down gracefully (SIGTERM), then kills it.
func (n *Node) Stop(grace time.Duration) error {
	if n.PID() == 0 {
		return nil
	}
	_ = n.Resume()
	_ = n.signal(syscall.SIGTERM)
	if err := n.wait(grace); err == nil {
		return nil
	}
	_ = n.signal(syscall.SIGKILL)
	return n.wait(10 * time.Second)
}

// Pause freezes the agent (SIGSTOP); its jobs keep running.
func (n *Node) Pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
	return nil
}

// Resume continues a paused agent.
func (n *Node) Resume() error {
	n.mu.Lock()
	p := n.paused
	n.paused = false
	n.mu.Unlock()
	if !p {
		return nil
	}
	return n.signal(syscall.SIGCONT)
}

func (n *Node) wait(d time.Duration) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("%s did not exit within %v", n.Name, d)
	}
}
