package objstoretest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The weed process itself, shared by Server (loopback, one test) and
// jepsen's rig.Store (the bridge's address, stopped and started again by
// the store-down nemesis).

// WeedPath is where the weed binary should be: $FOREMAN_WEED, else
// bin/weed at the repository's root. The caller checks it is there.
func WeedPath() string {
	if bin := os.Getenv("FOREMAN_WEED"); bin != "" {
		return bin
	}
	return filepath.Join(repoRoot(), "bin", "weed")
}

func repoRoot() string {
	d, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		p := filepath.Dir(d)
		if p == d {
			return "."
		}
		d = p
	}
}

// StartWeed starts `weed mini` in dir (made if missing) with bucket,
// bound to ip on the nine ports of FreePorts: master, volume, filer and
// S3 gateway, each with its gRPC port, then admin; ports[6] is the S3
// gateway. env is added to its environment (the credentials) and its
// output is appended to dir/weed.log.
func StartWeed(bin, dir, ip, bucket string, ports []int, env []string) (*Weed, error) {
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	args := []string{"mini", "-dir=" + dir, "-ip=" + ip, "-ip.bind=" + ip,
		"-master.port=" + p(0), "-master.port.grpc=" + p(1),
		"-volume.port=" + p(2), "-volume.port.grpc=" + p(3),
		"-filer.port=" + p(4), "-filer.port.grpc=" + p(5),
		"-s3.port=" + p(6), "-s3.port.grpc=" + p(7),
		"-admin.port=" + p(8), "-admin.ui=false", "-admin.port.legacy=0",
		"-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-master.telemetry=false", "-bucket=" + bucket,
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(filepath.Join(dir, "weed.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own copy once started
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	w := &Weed{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.done) }()
	return w, nil
}

// Weed is a weed process StartWeed started.
type Weed struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Done is closed when the process has exited.
func (w *Weed) Done() <-chan struct{} { return w.done }

// Stop stops the process (SIGTERM to its process group, then SIGKILL
// after 20s) and waits until it has exited.
func (w *Weed) Stop() {
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
	}
}

// FreePorts finds n distinct free ports on ip. They are free when
// returned; the server binds them a moment later.
func FreePorts(ip string, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for len(out) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
